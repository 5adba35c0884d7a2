/**
 * Watching locks: every grant, handoff, release, expiry and force-release
 * under a prefix, in log order, resumed across reconnects and failovers
 * without a gap or a repeat.
 * @packageDocumentation
 */

import { LockMode, num, text, toU64, u64, unb64 } from "./codec";
import { ErrorBody, RaftlockError, errorFromBody } from "./errors";
import { Cluster, OpenStream, retryable } from "./transport";
import { Sleeper, jitter } from "./time";

/**
 * What happened to a lock.
 *
 * - `granted`: granted to an acquire at once;
 * - `handoff`: granted to a waiter by the command that freed the lock;
 * - `released`: released by its holder, or by the holder closing its session;
 * - `expired`: released because the holder's session expired;
 * - `forceReleased`: taken away by an administrator;
 * - `holdExpired`: released by the leader because the hold's cap ran out;
 * - `lockDelayStarted` / `lockDelayEnded`: nobody is granted the lock in between.
 *
 * @example
 * ```ts
 * const freed: LockEventKind[] = ["released", "expired", "forceReleased", "holdExpired"];
 * ```
 */
export type LockEventKind = "granted" | "handoff" | "released" | "expired" | "forceReleased" | "holdExpired" | "lockDelayStarted" | "lockDelayEnded";

const KINDS: Record<string, LockEventKind> = {
  LOCK_EVENT_KIND_GRANTED: "granted",
  LOCK_EVENT_KIND_HANDOFF: "handoff",
  LOCK_EVENT_KIND_RELEASED: "released",
  LOCK_EVENT_KIND_EXPIRED: "expired",
  LOCK_EVENT_KIND_FORCE_RELEASED: "forceReleased",
  LOCK_EVENT_KIND_HOLD_EXPIRED: "holdExpired",
  LOCK_EVENT_KIND_LOCK_DELAY_STARTED: "lockDelayStarted",
  LOCK_EVENT_KIND_LOCK_DELAY_ENDED: "lockDelayEnded",
};

/**
 * One change of one lock's holders.
 *
 * @example
 * ```ts
 * const e: LockEvent = batch.events[0];
 * console.log(e.kind, e.name, `session ${e.sessionId}`, `token ${e.token}`);
 * ```
 */
export interface LockEvent {
  /** What happened. */
  readonly kind: LockEventKind;
  /** Lock name. */
  readonly name: string;
  /** The session that got or lost the lock (0n for a lock-delay). */
  readonly sessionId: bigint;
  /** The grant's fencing token (0n for a lock-delay). */
  readonly token: bigint;
  /** How it is held (grants and handoffs). */
  readonly mode: LockMode;
  /** The holder's metadata (grants and handoffs). */
  readonly metadata: Uint8Array;
  /** `metadata` decoded as UTF-8. */
  readonly metadataText: string;
  /** Permits taken (grants and handoffs; 1 otherwise). */
  readonly count: number;
  /** How long a lock-delay lasts, ms (`lockDelayStarted`). */
  readonly lockDelayMs: number;
}

/**
 * The events one applied command caused under the watched prefix.
 *
 * @example
 * ```ts
 * for await (const batch of client.watch("deploy/")) {
 *   console.log(`at index ${batch.index}: ${batch.events.length} event(s)`);
 * }
 * ```
 */
export interface WatchBatch {
  /** The command's index: what a watch resumes after ({@link WatchOptions.afterIndex}). */
  readonly index: bigint;
  /** When the leader proposed it (its wall clock, Unix ms). */
  readonly atMs: number;
  /** The events, in order. */
  readonly events: LockEvent[];
}

/**
 * How to watch.
 *
 * @example
 * ```ts
 * const opts: WatchOptions = { afterIndex: savedIndex, signal: AbortSignal.timeout(60_000) };
 * ```
 */
export interface WatchOptions {
  /** Resume after this index (a {@link WatchBatch.index} seen before, say by an earlier run); 0 or absent: from now on. */
  afterIndex?: bigint | string | number;
  /** Ends the watch when aborted: a pending `next()` finishes with `done: true`. */
  signal?: AbortSignal;
}

interface LockEventJson {
  kind?: string;
  name?: string;
  sessionId?: string;
  token?: string;
  mode?: string;
  metadata?: string;
  count?: number;
  lockDelayMs?: string;
}

interface WatchJson {
  index?: string;
  atMs?: string;
  events?: LockEventJson[];
  error?: ErrorBody;
}

function event(e: LockEventJson): LockEvent {
  const metadata = unb64(e.metadata);
  return {
    // A kind a newer server added reads as the nearest one this client knows.
    kind: KINDS[e.kind ?? ""] ?? "granted",
    name: e.name ?? "",
    sessionId: u64(e.sessionId),
    token: u64(e.token),
    mode: e.mode === "LOCK_MODE_SHARED" ? "shared" : "exclusive",
    metadata,
    metadataText: text(metadata),
    count: Math.max(num(e.count), 1),
    lockDelayMs: num(e.lockDelayMs),
  };
}

/**
 * Every change of lock holders under a prefix, one {@link WatchBatch} per
 * applied command, in log order. Any node serves a watch; when its node
 * goes away the watch reopens on another and resumes after the last
 * command it delivered, so nothing is missed or repeated. It ends with a
 * thrown {@link WatchCompacted} when it was away longer than the node's
 * history reaches (read the state afresh with {@link Client.list} and watch
 * again), or with the error of a refusal a retry cannot fix (a bad prefix,
 * no right to read). `break`, {@link Watch.close} or the options' `signal`
 * end it quietly.
 *
 * @example
 * ```ts
 * const stop = new AbortController();
 * for await (const batch of client.watch("deploy/", { signal: stop.signal })) {
 *   for (const e of batch.events) console.log(e.kind, e.name, e.token);
 *   saveResumePoint(batch.index);
 * }
 * ```
 */
export class Watch implements AsyncIterableIterator<WatchBatch> {
  private closed = false;
  private after: bigint;
  private stream: OpenStream | undefined;
  private readonly hangUp = new AbortController();
  private readonly sleeper = new Sleeper();
  private readonly gen: AsyncGenerator<WatchBatch, void, undefined>;
  private readonly signal: AbortSignal | undefined;
  private readonly onAbort = (): void => this.close();

  /** @internal Created by {@link Client.watch}. */
  constructor(
    private readonly cluster: Cluster,
    /** The prefix watched ("" for every lock the caller may read). */
    readonly prefix: string,
    options: WatchOptions,
    private readonly onClose: (w: Watch) => void,
  ) {
    this.after = options.afterIndex === undefined ? 0n : toU64(options.afterIndex, "afterIndex");
    this.gen = this.run();
    this.signal = options.signal;
    if (this.signal?.aborted) this.close();
    else this.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  /**
   * The index the watch would resume after: the last batch delivered, or
   * where the stream started (when started from now: 0n until it first
   * opened on a node that has applied a command). Save it to resume with
   * {@link WatchOptions.afterIndex}.
   *
   * @example
   * ```ts
   * const resumeAt = watch.index;
   * const again = client.watch("deploy/", { afterIndex: resumeAt });
   * ```
   */
  get index(): bigint {
    return this.after;
  }

  /**
   * The next batch of events.
   *
   * @example
   * ```ts
   * const { value: batch, done } = await watch.next();
   * ```
   */
  next(): Promise<IteratorResult<WatchBatch>> {
    return this.gen.next();
  }

  /**
   * Ends the watch (what `break` in `for await` calls).
   *
   * @example
   * ```ts
   * await watch.return();
   * ```
   */
  return(): Promise<IteratorResult<WatchBatch>> {
    this.close();
    return this.gen.return(undefined);
  }

  /**
   * Itself: a watch is iterated once.
   *
   * @example
   * ```ts
   * for await (const batch of watch) console.log(batch.index);
   * ```
   */
  [Symbol.asyncIterator](): Watch {
    return this;
  }

  /**
   * Hangs up now, even while waiting for the next batch; a pending
   * `next()` then finishes with `done: true`.
   *
   * @example
   * ```ts
   * setTimeout(() => watch.close(), 60_000);
   * ```
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal?.removeEventListener("abort", this.onAbort);
    this.hangUp.abort();
    this.stream?.cancel();
    this.sleeper.wake();
    this.onClose(this);
  }

  private async *run(): AsyncGenerator<WatchBatch, void, undefined> {
    let backoff = this.cluster.options.initialBackoffMs;
    while (!this.closed) {
      const addr = this.cluster.target();
      try {
        this.stream = await this.cluster.openStream(addr, "/v1/lock/watch", { prefix: this.prefix, afterIndex: String(this.after) }, this.hangUp.signal);
        if (this.closed) break;
        let buffered = "";
        for await (const chunk of this.stream.res) {
          buffered += typeof chunk === "string" ? chunk : text(chunk);
          let nl: number;
          while ((nl = buffered.indexOf("\n")) >= 0) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (line === "") continue;
            const msg = JSON.parse(line) as WatchJson;
            if (msg.error) throw errorFromBody(msg.error);
            backoff = this.cluster.options.initialBackoffMs;
            const index = u64(msg.index);
            // The opening answer has no events: only where the stream
            // starts, which is where a reopened one must resume.
            if (index <= this.after) continue;
            this.after = index;
            const events = (msg.events ?? []).map(event);
            if (events.length === 0) continue;
            yield { index, atMs: num(msg.atMs), events };
            if (this.closed) return;
          }
        }
        if (this.closed) break;
        // Ended without an error object: the node went away.
        this.cluster.forget(addr);
      } catch (raw) {
        if (this.closed) break;
        const e = raw instanceof RaftlockError ? raw : undefined;
        if (e !== undefined && !retryable(e)) {
          this.close();
          throw e;
        }
        if (e !== undefined ? this.cluster.learn(addr, e) : (this.cluster.forget(addr), false)) continue;
      } finally {
        this.stream?.cancel();
        this.stream = undefined;
      }
      await this.sleeper.sleep(jitter(backoff));
      backoff = Math.min(backoff * 2, this.cluster.options.maxBackoffMs);
    }
  }
}
