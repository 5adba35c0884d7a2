/**
 * Sessions: created with a TTL, kept alive in the background, and judged
 * locally by their lease (see lease.ts).
 * @packageDocumentation
 */

import type { Client } from "./client";
import { LockGuard, LockOptions, acquire } from "./lock";
import { LockAllOptions, LockSet, acquireAll } from "./lockall";
import { Leadership, CampaignOptions, campaign } from "./election";
import { Lease } from "./lease";
import { PermissionDenied, RaftlockError, SessionGone, SessionLost, Unauthenticated } from "./errors";
import { Cluster } from "./transport";
import { Sleeper, jitter, now } from "./time";

/**
 * One logical request's sequence number (Raft dissertation §6.3): retries
 * reuse it, and `ackedBelow` tells the server which answers it may forget.
 */
export interface Ticket {
  readonly seq: number;
  /** The lowest number still waiting for its answer (this one at most). */
  ackedBelow(): number;
  /**
   * The numbers still waiting for their answers, this one's included (the
   * lowest 1,024): every other number up to the highest is acknowledged,
   * so a long wait does not keep the answers of the calls made beside it.
   */
  inFlight(): string[];
  /** The answer is in, or the caller gave up and will not retry. */
  done(): void;
}

/**
 * A live session: a lease on the cluster that owns locks and waits. It is
 * kept alive every TTL/3 in the background and counts as valid only until
 * the send time of its last acknowledged keep-alive + TTL − margin; past
 * that, or when the server says it is gone, it is lost for good and
 * {@link Session.lost} resolves. Everything it holds is released when it
 * ends. Create one with {@link Client.session}.
 *
 * @example
 * ```ts
 * const session = await client.session({ ttlMs: 10_000 });
 * const guard = await session.lock("payments/settle", { timeoutMs: 5_000 });
 * try { await write(guard.token); } finally { await guard.release(); }
 * await session.close();
 * ```
 */
export class Session {
  /** @internal */
  readonly lease: Lease;
  private seq = 0;
  private readonly waiting = new Set<number>();
  private readonly sleeper = new Sleeper();
  private closing = false;

  /** @internal Use {@link Client.session}. */
  constructor(
    /** The client this session was created by. */
    readonly client: Client,
    /** @internal */
    readonly cluster: Cluster,
    id: bigint,
    ttlMs: number,
    sentAt: number,
  ) {
    this.lease = new Lease(id, ttlMs, sentAt);
    void this.keepAlive(sentAt);
  }

  /**
   * The session id, from the log entry that created it (never reused).
   *
   * @example
   * ```ts
   * console.log(`session ${session.id}`);
   * ```
   */
  get id(): bigint {
    return this.lease.id;
  }

  /**
   * The TTL the server granted, in ms.
   *
   * @example
   * ```ts
   * console.log(session.ttlMs); // 10000
   * ```
   */
  get ttlMs(): number {
    return this.lease.ttlMs;
  }

  /**
   * Whether the session still counts as alive here: a keep-alive was
   * acknowledged recently enough that the leader cannot have expired it.
   *
   * @example
   * ```ts
   * if (!session.valid) throw new Error("lost the session: stop writing");
   * ```
   */
  get valid(): boolean {
    return this.lease.valid;
  }

  /**
   * The local validity deadline on the `performance.now()` clock: until
   * then the leader cannot have expired the session. It moves forward with
   * every acknowledged keep-alive; once passed, it stays passed.
   *
   * @example
   * ```ts
   * const leftMs = session.validUntil - performance.now();
   * if (leftMs < 500) console.log("too close to the deadline to start a write");
   * ```
   */
  get validUntil(): number {
    return this.lease.validUntil;
  }

  /**
   * Resolves (never rejects) with the reason once the session is lost
   * ({@link SessionLost}) or ended ({@link SessionGone}: closed here, or
   * gone on the server).
   *
   * @example
   * ```ts
   * session.lost.then((reason) => { console.error("stop:", reason.message); process.exit(1); });
   * ```
   */
  get lost(): Promise<RaftlockError> {
    return this.lease.lost;
  }

  /**
   * Throws the reason the session is not valid, if it is not.
   *
   * @example
   * ```ts
   * session.check(); // before a write that needs the session's locks
   * ```
   */
  check(): void {
    const r = this.lease.reason;
    if (r !== undefined) throw r;
  }

  /**
   * Acquires lock `name` for this session, waiting in the lock's FIFO queue
   * on the server (no polling) up to `timeoutMs` (default one hour, the
   * server's longest single wait; `Infinity` waits in turns until the session
   * ends). Throws {@link WaitTimedOut} if the wait ends without the lock.
   * `shared` takes a read lock; `permits: n` a place in a counting
   * semaphore of `n` (`count: k`: k places at once); `metadata` is shown
   * to `describe`. `maxHoldMs` caps the hold (the guard counts it lost
   * before the leader releases it); `lockDelayMs` keeps the lock from
   * everyone for that long if the hold ends without a release.
   *
   * @example
   * ```ts
   * const guard = await session.lock("jobs/nightly", { timeoutMs: 30_000, metadata: "host-7" });
   * console.log("token", guard.token);
   * const capped = await session.lock("reports/rebuild", { maxHoldMs: 600_000, lockDelayMs: 10_000 });
   * ```
   */
  lock(name: string, options: LockOptions = {}): Promise<LockGuard> {
    return acquire(this, name, options, true) as Promise<LockGuard>;
  }

  /**
   * Takes lock `name` only if it is free now (and nobody queues for it,
   * and it is not in lock-delay): the guard, or `null` when it is busy. A
   * busy lock is an ordinary outcome here, not an error.
   *
   * @example
   * ```ts
   * const guard = await session.tryLock("cron/report");
   * if (guard === null) console.log("another instance runs it");
   * ```
   */
  tryLock(name: string, options: Omit<LockOptions, "timeoutMs"> = {}): Promise<LockGuard | null> {
    return acquire(this, name, options, false);
  }

  /**
   * Acquires every lock of `names` (2 to 64, any order, repeats count
   * once) exclusively and together: the cluster grants the whole set in
   * one log entry, or none of it. A set that must wait queues on all of
   * its locks at once and is granted when it is first in every queue and
   * every lock is free, so callers that need overlapping sets never
   * deadlock. Waits up to `timeoutMs` (as {@link Session.lock}), then
   * throws {@link WaitTimedOut} with no waiter left behind. The set is
   * numbered in the session's exactly-once sequence and retried with one
   * request id; an aborted `signal` takes it out of every queue.
   *
   * @example
   * ```ts
   * const both = await session.lockAll(["accounts/17", "accounts/42"], { timeoutMs: 5_000 });
   * try {
   *   await transfer(both.tokens);
   * } finally {
   *   await both.release();
   * }
   * ```
   */
  lockAll(names: readonly string[], options: LockAllOptions = {}): Promise<LockSet> {
    return acquireAll(this, names, options, true) as Promise<LockSet>;
  }

  /**
   * Takes every lock of `names` together if all are free now (and nobody
   * queues for any, and none is in lock-delay): the set, or `null`, with
   * none of them taken. A busy lock is an ordinary outcome here, not an
   * error.
   *
   * @example
   * ```ts
   * const both = await session.tryLockAll(["printers/a", "printers/b"]);
   * if (both === null) console.log("one of them is busy");
   * else await both.release();
   * ```
   */
  tryLockAll(names: readonly string[], options: Omit<LockAllOptions, "timeoutMs"> = {}): Promise<LockSet | null> {
    return acquireAll(this, names, options, false);
  }

  /**
   * Campaigns in election `name`: waits in line (candidates are elected in
   * the order they started) until this session leads, publishing `value`.
   * Without `timeoutMs` it campaigns as long as the session lives.
   *
   * @example
   * ```ts
   * const leadership = await session.campaign("scheduler", "host-7:8080");
   * console.log("leading with token", leadership.token);
   * ```
   */
  campaign(name: string, value: string | Uint8Array = "", options: CampaignOptions = {}): Promise<Leadership> {
    return campaign(this, name, value, options);
  }

  /**
   * Ends the session on the server: its locks are released and its waits
   * cancelled at once. Resolves with the names of the locks it released.
   *
   * @example
   * ```ts
   * const released = await session.close();
   * ```
   */
  async close(options: { deadlineMs?: number } = {}): Promise<string[]> {
    if (this.closing) return [];
    this.closing = true;
    this.lease.end(new SessionGone(`session ${this.id} closed`, { code: "NOT_FOUND" }));
    this.sleeper.wake();
    this.client.forgetSession(this);
    try {
      const r = await this.cluster.call<{ released?: string[] }>(
        "/v1/session/close",
        () => ({ body: { sessionId: String(this.id) } }),
        { deadlineMs: options.deadlineMs },
      );
      return r.released ?? [];
    } catch (e) {
      // Already gone: expired, or an earlier attempt closed it.
      if (e instanceof SessionGone) return [];
      throw e;
    }
  }

  /** @internal Numbers a new logical request of this session. */
  ticket(): Ticket {
    const seq = ++this.seq;
    this.waiting.add(seq);
    return {
      seq,
      ackedBelow: () => {
        let low = seq;
        for (const s of this.waiting) if (s < low) low = s;
        return low;
      },
      inFlight: () => [...this.waiting].sort((a, b) => a - b).slice(0, 1024).map(String),
      done: () => {
        this.waiting.delete(seq);
      },
    };
  }

  /** @internal The server says the session is gone. */
  markGone(cause?: RaftlockError): void {
    this.lease.end(new SessionGone(`session ${this.id} is gone (expired or closed)`, { code: "NOT_FOUND", reason: "SESSION_NOT_FOUND", cause }));
    this.sleeper.wake();
    this.client.forgetSession(this);
  }

  /** @internal Stops keeping the session alive without closing it. */
  abandon(reason: RaftlockError): void {
    this.lease.end(reason);
    this.sleeper.wake();
  }

  /**
   * Renews the session every TTL/3 from the send time of its last
   * acknowledged renewal, one request each, sooner after a failure (a
   * failover leaves little of the TTL). Ends when the lease does.
   */
  private async keepAlive(createdAt: number): Promise<void> {
    const interval = this.ttlMs / 3;
    // A renewal unanswered this long means a frozen, cut-off or deposed
    // node: try another rather than wait out the TTL on it.
    const patience = Math.min(interval, 2000);
    const maxBackoff = Math.min(interval / 4, 250);
    let due = createdAt + interval;
    let backoff = 50;
    while (this.lease.reason === undefined) {
      await this.sleeper.sleep(due - now());
      if (this.lease.reason !== undefined) break;
      const addr = this.cluster.target();
      const sent = now();
      try {
        await this.cluster.attempt(addr, "/v1/session/keepalive", { sessionId: String(this.id) }, patience, 0);
        this.cluster.remember(addr);
        this.lease.acknowledged(sent);
        due = sent + interval;
        backoff = 50;
      } catch (raw) {
        if (this.cluster.isClosed) break;
        const e = raw instanceof RaftlockError ? raw : undefined;
        if (e instanceof SessionGone) {
          this.markGone(e);
          break;
        }
        if (e instanceof Unauthenticated || e instanceof PermissionDenied) {
          // No renewal can succeed with these credentials.
          this.abandon(new SessionLost(`session ${this.id} cannot be renewed: ${e.message}`, { code: e.code, reason: e.reason, cause: e }));
          break;
        }
        const hinted = e !== undefined && this.cluster.learn(addr, e);
        due = now() + (hinted ? 0 : jitter(backoff));
        backoff = Math.min(backoff * 2, maxBackoff);
      }
    }
    this.client.forgetSession(this);
  }
}
