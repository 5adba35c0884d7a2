/**
 * Acquiring locks, and the guard that knows its fencing token and whether
 * it can still be claimed.
 * @packageDocumentation
 */

import type { Session } from "./session";
import { Grant, GrantJson, b64, bytesOf, grantFrom, newRequestId } from "./codec";
import { HoldExpired, InvalidArgument, NotHolder, RaftlockError, SessionGone, WaitTimedOut } from "./errors";
import { safetyMargin } from "./lease";
import { now } from "./time";

/**
 * The longest single wait the server allows by default (its
 * `--max-wait-ms`); longer waits are waited in turns.
 *
 * @example
 * ```ts
 * await session.lock("deploy", { timeoutMs: MAX_WAIT_MS }); // the default
 * ```
 */
export const MAX_WAIT_MS = 3_600_000;

/**
 * How to acquire a lock.
 *
 * @example
 * ```ts
 * const opts: LockOptions = { timeoutMs: 5_000, permits: 4, metadata: "worker-3" };
 * const batch: LockOptions = { permits: 8, count: 3, maxHoldMs: 60_000 };
 * ```
 */
export interface LockOptions {
  /** How long to wait in the queue (default {@link MAX_WAIT_MS}; `Infinity`: until the session ends). */
  timeoutMs?: number;
  /** A read lock: any number of shared holders, never beside an exclusive one. */
  shared?: boolean;
  /** A counting semaphore of this many places (implies `shared`). */
  permits?: number;
  /** Permits of the semaphore to take at once (implies `shared`; default 1): granted only when this many are free, in FIFO order. */
  count?: number;
  /**
   * Hold cap, ms (1 000 to 604 800 000): the leader releases the lock this
   * long after granting it, even though the session lives. The guard counts
   * the lock lost a safety margin before then, counted from when the
   * acquire was first sent (time spent queued counts too). Without it the
   * server may apply its default for the name's prefix; the guard knows
   * either way.
   */
  maxHoldMs?: number;
  /**
   * Lock-delay, ms (exclusive locks, at most 60 000): if the hold ends
   * without a release (the session expires, it is force-released, its cap
   * runs out), nobody is granted the lock for this long, so that a holder
   * that missed its loss has time to stop. A release (or closing the
   * session) sets none.
   */
  lockDelayMs?: number;
  /** Stored with the grant, shown by `describe` (at most 4 KiB; strings are UTF-8). */
  metadata?: string | Uint8Array;
  /**
   * Gives the wait up when aborted: the call rejects with the signal's
   * reason, the waiter leaves the server's queue at once, and a grant that
   * raced the abort is released, never left held.
   */
  signal?: AbortSignal;
}

interface AcquireJson {
  grant?: GrantJson;
  acquired?: boolean;
  holders?: GrantJson[];
}

/**
 * A held lock. Pass {@link LockGuard.token} with every write to the
 * resource the lock protects, and have the resource refuse a token lower
 * than the highest it has seen: a holder paused past its lease still
 * believes it holds the lock, and the token is what stops its late writes.
 *
 * @example
 * ```ts
 * const guard = await session.lock("payments/settle");
 * try {
 *   if (guard.valid) await db.write({ fence: guard.token });
 * } finally {
 *   await guard.release();
 * }
 * ```
 */
export class LockGuard {
  private released = false;
  private current: Grant;
  /** When the hold cap makes the lock lost (`performance.now()` clock). */
  private readonly capUntil: number | undefined;
  private capTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly lostPromise: Promise<RaftlockError>;

  /**
   * @internal Created by {@link Session.lock}. `sentAt` is when the
   * acquire was first sent (`performance.now()` clock): a hold cap counts
   * from it, since the leader counts from its grant, which is later.
   * Without it a cap counts from now.
   */
  constructor(
    /** The session holding the lock. */
    readonly session: Session,
    grant: Grant,
    sentAt?: number,
  ) {
    this.current = grant;
    const cap = grant.maxHoldMs;
    if (!(cap > 0)) {
      this.lostPromise = session.lost;
      return;
    }
    // The same margin as a session's TTL: the leader's clock may run
    // slightly faster than this one, and timers fire late.
    const until = (sentAt ?? now()) + cap - safetyMargin(cap);
    this.capUntil = until;
    const capped = new Promise<RaftlockError>((resolve) => {
      const fire = (): void => {
        this.capTimer = undefined;
        if (this.released) return;
        if (now() >= until) resolve(new HoldExpired(`lock ${JSON.stringify(grant.name)} lost: its hold cap of ${cap} ms ran out`, { code: "FAILED_PRECONDITION" }));
        else this.capTimer = setTimeout(fire, Math.max(1, until - now()));
      };
      this.capTimer = setTimeout(fire, Math.max(0, until - now()));
    });
    this.lostPromise = Promise.race([session.lost, capped]);
    void session.lost.then(() => this.stopCapTimer());
  }

  /**
   * The fencing token: strictly increasing per lock, in grant order.
   *
   * @example
   * ```ts
   * await fetch(url, { headers: { "x-fencing-token": String(guard.token) } });
   * ```
   */
  get token(): bigint {
    return this.grant.token;
  }

  /**
   * The lock's name.
   *
   * @example
   * ```ts
   * console.log(`holding ${guard.name}`);
   * ```
   */
  get name(): string {
    return this.grant.name;
  }

  /**
   * Whether this client can still claim the lock: not released, the
   * session within its local validity deadline, and the hold cap (if any)
   * not run out by the same rule.
   *
   * @example
   * ```ts
   * for (const item of batch) { if (!guard.valid) break; await handle(item, guard.token); }
   * ```
   */
  get valid(): boolean {
    return !this.released && this.session.valid && !this.capExpired;
  }

  /**
   * Until when (on the `performance.now()` clock) the lock can be claimed
   * if no further keep-alive is acknowledged: the session's deadline, or
   * the hold cap's if that comes first.
   *
   * @example
   * ```ts
   * if (guard.validUntil - performance.now() < 1_000) await renewFirst();
   * ```
   */
  get validUntil(): number {
    const s = this.session.validUntil;
    return this.capUntil === undefined ? s : Math.min(s, this.capUntil);
  }

  /**
   * When the hold cap makes the lock lost (`performance.now()` clock, a
   * safety margin before the leader releases it), or `undefined` when the
   * grant has no cap.
   *
   * @example
   * ```ts
   * if (guard.holdUntil !== undefined) console.log(`${guard.holdUntil - performance.now()} ms left`);
   * ```
   */
  get holdUntil(): number | undefined {
    return this.capUntil;
  }

  /**
   * Resolves (never rejects) with the reason when the lock can no longer
   * be claimed: its session was lost or ended, or its hold cap ran out
   * ({@link HoldExpired}). Releasing the guard does not resolve it.
   *
   * @example
   * ```ts
   * guard.lost.then((reason) => abortController.abort(reason));
   * ```
   */
  get lost(): Promise<RaftlockError> {
    return this.lostPromise;
  }

  private get capExpired(): boolean {
    return this.capUntil !== undefined && now() >= this.capUntil;
  }

  private stopCapTimer(): void {
    if (this.capTimer !== undefined) clearTimeout(this.capTimer);
    this.capTimer = undefined;
  }

  /** The grant as the cluster recorded it (shared after {@link LockGuard.downgrade}). */
  get grant(): Grant {
    return this.current;
  }

  /**
   * Makes this exclusive hold shared, as a read-write lock's writer becomes
   * a reader without letting go: the token stays the same, and the readers
   * queued at the front are granted beside it in the same log entry, so no
   * other writer comes between. A hold already shared stays so; the hold's
   * lock-delay is dropped (it protects exclusive holds only).
   *
   * @example
   * ```ts
   * const guard = await session.lock("config/routes");
   * await writeRoutes(guard.token);
   * await guard.downgrade(); // guard.grant.mode === "shared"
   * ```
   */
  async downgrade(): Promise<void> {
    const s = this.session;
    const r = await s.cluster.call<{ hold?: GrantJson }>("/v1/lock/downgrade", () => ({
      body: { sessionId: String(s.id), name: this.name, token: String(this.token) },
    }));
    if (r.hold) this.current = grantFrom(r.hold);
  }

  /**
   * Releases the lock; the next waiter is granted in the same log entry.
   * Releasing twice, or after the session ended (which released the lock),
   * does nothing. Throws {@link NotHolder} if the lock was taken away
   * (force-released).
   *
   * @example
   * ```ts
   * await guard.release();
   * ```
   */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.stopCapTimer();
    const s = this.session;
    // A lost session is not renewed any more: the leader expires it within
    // the safety margin, and its locks with it.
    if (s.lease.reason !== undefined) return;
    let retried = false;
    try {
      await s.cluster.call("/v1/lock/release", (attempt) => {
        retried = retried || attempt > 0;
        return { body: { sessionId: String(s.id), name: this.name, token: String(this.token) } };
      });
    } catch (e) {
      // A retry that finds the lock free: an earlier attempt released it
      // and only its answer was lost. Once the hold cap has run out, the
      // leader released it.
      if ((retried || this.capExpired) && e instanceof NotHolder) return;
      if (e instanceof SessionGone) {
        s.markGone(e);
        return;
      }
      throw e;
    }
  }
}

function checkOptions(o: LockOptions): void {
  for (const [what, v] of [["permits", o.permits], ["count", o.count]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > 0xffffffff)) {
      throw new InvalidArgument(`${what} must be a whole number, got ${v}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
  }
  for (const [what, v] of [["maxHoldMs", o.maxHoldMs], ["lockDelayMs", o.lockDelayMs]] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) {
      throw new InvalidArgument(`${what} must be a whole number of ms, got ${v}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
  }
  if (o.timeoutMs !== undefined && !(o.timeoutMs >= 0)) {
    throw new InvalidArgument(`timeoutMs must be at least 0, got ${o.timeoutMs}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
  }
}

/**
 * @internal Cancels a wait its caller gave up on, in the background: the
 * server would see the closed connection too, but this is sooner, and
 * reaches the leader even if the wait went through another node. A set's
 * wait (several `names`) is cancelled through its first name, which
 * cancels the whole set; every name waits for the cancel before it is
 * acquired again.
 */
export function cancelWaitSoon(s: Session, names: string | readonly string[], requestId: string): void {
  const all = typeof names === "string" ? [names] : names;
  const name = all[0];
  if (!s.valid || name === undefined) return;
  const cancel = s.cluster
    .call("/v1/lock/cancel-wait", () => ({ body: { sessionId: String(s.id), name, requestId } }))
    .then(
      () => undefined,
      () => undefined, // the server ends the wait at its deadline anyway
    );
  let byName = cancelling.get(s);
  if (!byName) {
    byName = new Map();
    cancelling.set(s, byName);
  }
  const map = byName;
  for (const n of all) {
    let pending = map.get(n);
    if (!pending) {
      pending = new Set();
      map.set(n, pending);
    }
    const set = pending;
    set.add(cancel);
    void cancel.then(() => {
      set.delete(cancel);
      if (set.size === 0 && map.get(n) === set) map.delete(n);
    });
  }
}

/** Each session's abandoned waits whose cancel is still on its way, by lock name. */
const cancelling = new WeakMap<Session, Map<string, Set<Promise<void>>>>();

/**
 * @internal Lets the cancels of a lock's abandoned waits finish first: a
 * grant that raced its cancel is the session's until the cancel releases
 * it, and an acquisition sent meanwhile would be refused `ALREADY_HELD`
 * though the caller holds nothing it knows of. Each cancel ends within the
 * client's deadline.
 */
export async function cancelsSettled(s: Session, name: string): Promise<void> {
  const pending = cancelling.get(s)?.get(name);
  if (pending && pending.size > 0) await Promise.all([...pending]);
}

/** @internal A lock acquisition: waiting (in turns of at most
 * {@link MAX_WAIT_MS}) or a try-lock. */
export async function acquire(session: Session, name: string, o: LockOptions, wait: boolean): Promise<LockGuard | null> {
  checkOptions(o);
  if (!wait) return acquireOnce(session, name, o, null);
  const total = o.timeoutMs ?? MAX_WAIT_MS;
  const end = now() + total;
  for (;;) {
    const turn = Math.min(MAX_WAIT_MS, Math.max(0, end - now()));
    try {
      const g = await acquireOnce(session, name, o, turn);
      if (g !== null) return g;
    } catch (e) {
      if (!(e instanceof WaitTimedOut)) throw e;
      if (now() >= end - 1 || !session.valid) throw e;
      continue;
    }
    throw new WaitTimedOut(`timed out waiting for lock ${JSON.stringify(name)}`, { code: "DEADLINE_EXCEEDED", reason: "WAIT_TIMED_OUT" });
  }
}

/** One acquisition: numbered once and retried as one, with one request id,
 * so a retry finds the grant or queue place the first attempt got. */
async function acquireOnce(session: Session, name: string, o: LockOptions, waitMs: number | null): Promise<LockGuard | null> {
  session.check();
  await cancelsSettled(session, name);
  const s = session;
  const requestId = b64(newRequestId());
  const metadata = bytesOf(o.metadata);
  const permits = o.permits ?? 0;
  const count = o.count ?? 0;
  const shared = o.shared === true || permits > 0 || count > 0;
  const ticket = s.ticket();
  const started = now();
  const attemptTimeout = s.cluster.options.attemptTimeoutMs;
  try {
    const r = await s.cluster.call<AcquireJson>(
      "/v1/lock/acquire",
      () => {
        // Each retry waits only what is left, not the whole wait again.
        const left = waitMs === null ? null : Math.max(0, Math.floor(waitMs - (now() - started)));
        const body: Record<string, unknown> = {
          sessionId: String(s.id),
          name,
          requestId,
          mode: shared ? "LOCK_MODE_SHARED" : "LOCK_MODE_EXCLUSIVE",
          seq: String(ticket.seq),
          ackedBelow: String(ticket.ackedBelow()),
          inFlight: ticket.inFlight(),
        };
        if (permits > 0) body.permits = permits;
        if (count > 0) body.count = count;
        if (o.maxHoldMs) body.maxHoldMs = String(o.maxHoldMs);
        if (o.lockDelayMs) body.lockDelayMs = String(o.lockDelayMs);
        if (left !== null) body.waitTimeoutMs = String(left);
        if (metadata.length > 0) body.metadata = b64(metadata);
        return { body, timeoutMs: attemptTimeout + (left ?? 0) };
      },
      { deadlineMs: s.cluster.options.deadlineMs + (waitMs ?? 0), signal: o.signal },
    );
    // `started` precedes the first attempt: a hold cap counts from it.
    if (r.acquired && r.grant) return new LockGuard(s, grantFrom(r.grant), started);
    if (waitMs === null) return null;
    throw new WaitTimedOut(`timed out waiting for lock ${JSON.stringify(name)}`, { code: "DEADLINE_EXCEEDED", reason: "WAIT_TIMED_OUT" });
  } catch (e) {
    if (e instanceof SessionGone) s.markGone(e);
    if (waitMs !== null && o.signal?.aborted) cancelWaitSoon(s, name, requestId);
    throw e;
  } finally {
    ticket.done();
  }
}
