/**
 * Acquiring several locks together: one log entry grants them all, or none
 * is granted. A set that waits queues on every one of its locks at once, so
 * two callers that need overlapping sets never deadlock, whatever order
 * each names them in, which taking locks one at a time cannot promise.
 * @packageDocumentation
 */

import type { Session } from "./session";
import { GrantJson, b64, bytesOf, grantFrom, newRequestId } from "./codec";
import { InvalidArgument, RaftlockError, SessionGone, WaitTimedOut } from "./errors";
import { LockGuard, MAX_WAIT_MS, cancelWaitSoon, cancelsSettled } from "./lock";
import { now } from "./time";

/**
 * How to acquire a set of locks. A set is exclusive, with no hold cap or
 * lock-delay: take a lock that needs them on its own.
 *
 * @example
 * ```ts
 * const opts: LockAllOptions = { timeoutMs: 5_000, metadata: "transfer 8812" };
 * ```
 */
export interface LockAllOptions {
  /** How long to wait in the queues (default {@link MAX_WAIT_MS}; `Infinity`: until the session ends). */
  timeoutMs?: number;
  /** Stored with each grant, shown by `describe` (at most 4 KiB; strings are UTF-8). */
  metadata?: string | Uint8Array;
  /**
   * Gives the wait up when aborted: the call rejects with the signal's
   * reason, the set leaves every queue on the server at once, and a set
   * granted in a race with the abort is released, never left held.
   */
  signal?: AbortSignal;
}

interface AcquireAllJson {
  acquired?: boolean;
  grants?: GrantJson[];
  holders?: GrantJson[];
}

/**
 * Locks held together: one {@link LockGuard} per lock, in name order. Each
 * grant fences its own lock (one log entry granted them all, so their
 * tokens are equal) and is released on its own; {@link LockSet.release}
 * releases them all. They share a session, so they are lost together.
 *
 * @example
 * ```ts
 * const both = await session.lockAll(["accounts/17", "accounts/42"]);
 * try {
 *   await transfer(17, 42, both.tokens);
 * } finally {
 *   await both.release();
 * }
 * ```
 */
export class LockSet {
  /** @internal Created by {@link Session.lockAll} and {@link Session.tryLockAll}. */
  constructor(
    /** The session holding the locks. */
    readonly session: Session,
    /** The guard of each lock, in name order. */
    readonly guards: readonly LockGuard[],
  ) {}

  /**
   * The locks' names, in name order.
   *
   * @example
   * ```ts
   * console.log(`holding ${set.names.join(", ")}`);
   * ```
   */
  get names(): string[] {
    return this.guards.map((g) => g.name);
  }

  /**
   * Each lock's fencing token, by name: pass each with the writes to the
   * resource its lock protects.
   *
   * @example
   * ```ts
   * await ledger.debit("17", amount, { fence: set.tokens.get("accounts/17") });
   * ```
   */
  get tokens(): ReadonlyMap<string, bigint> {
    return new Map(this.guards.map((g) => [g.name, g.token]));
  }

  /**
   * The guard of lock `name`, or `undefined` if it is not in the set.
   *
   * @example
   * ```ts
   * const from = set.guard("accounts/17");
   * if (from?.valid) await from.release(); // a lock can be let go before the others
   * ```
   */
  guard(name: string): LockGuard | undefined {
    return this.guards.find((g) => g.name === name);
  }

  /**
   * Whether this client can still claim every lock of the set (see
   * {@link LockGuard.valid}).
   *
   * @example
   * ```ts
   * for (const step of steps) { if (!set.valid) break; await step(set.tokens); }
   * ```
   */
  get valid(): boolean {
    return this.guards.every((g) => g.valid);
  }

  /**
   * Until when (on the `performance.now()` clock) every lock of the set can
   * be claimed if no further keep-alive is acknowledged.
   *
   * @example
   * ```ts
   * const leftMs = set.validUntil - performance.now();
   * ```
   */
  get validUntil(): number {
    return Math.min(...this.guards.map((g) => g.validUntil));
  }

  /**
   * Resolves (never rejects) with the reason when any lock of the set can
   * no longer be claimed (its session was lost or ended). Releasing the set
   * does not resolve it.
   *
   * @example
   * ```ts
   * set.lost.then((reason) => abortController.abort(reason));
   * ```
   */
  get lost(): Promise<RaftlockError> {
    return Promise.race(this.guards.map((g) => g.lost));
  }

  /**
   * Releases every lock of the set, each with its own release (as
   * {@link LockGuard.release}: twice, or after the session ended, does
   * nothing). Every release is tried; the first failure, in name order,
   * is thrown after.
   *
   * @example
   * ```ts
   * await set.release();
   * ```
   */
  async release(): Promise<void> {
    const outcomes = await Promise.allSettled(this.guards.map((g) => g.release()));
    for (const o of outcomes) if (o.status === "rejected") throw o.reason;
  }
}

/** @internal A set's acquisition: waiting (in turns of at most
 * {@link MAX_WAIT_MS}) or a try. */
export async function acquireAll(session: Session, names: readonly string[], o: LockAllOptions, wait: boolean): Promise<LockSet | null> {
  if (o.timeoutMs !== undefined && !(o.timeoutMs >= 0)) {
    throw new InvalidArgument(`timeoutMs must be at least 0, got ${o.timeoutMs}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
  }
  // The server counts repeats once; one order makes every retry and cancel
  // name the set alike.
  const unique = [...new Set(names)].sort();
  if (!wait) return acquireAllOnce(session, unique, o, null);
  const end = now() + (o.timeoutMs ?? MAX_WAIT_MS);
  for (;;) {
    const turn = Math.min(MAX_WAIT_MS, Math.max(0, end - now()));
    try {
      const set = await acquireAllOnce(session, unique, o, turn);
      if (set !== null) return set;
      throw timedOut(unique);
    } catch (e) {
      if (!(e instanceof WaitTimedOut) || now() >= end - 1 || !session.valid) throw e;
    }
  }
}

function timedOut(names: readonly string[]): WaitTimedOut {
  return new WaitTimedOut(`timed out waiting for locks ${JSON.stringify(names)}`, { code: "DEADLINE_EXCEEDED", reason: "WAIT_TIMED_OUT" });
}

/** One acquisition of the set: numbered once in the session's sequence
 * and retried as one, with one request id, so a retry finds the grants or
 * queue places the first attempt got. */
async function acquireAllOnce(s: Session, names: readonly string[], o: LockAllOptions, waitMs: number | null): Promise<LockSet | null> {
  s.check();
  await Promise.all(names.map((n) => cancelsSettled(s, n)));
  const requestId = b64(newRequestId());
  const metadata = bytesOf(o.metadata);
  const ticket = s.ticket();
  const started = now();
  const attemptTimeout = s.cluster.options.attemptTimeoutMs;
  try {
    const r = await s.cluster.call<AcquireAllJson>(
      "/v1/lock/acquire-all",
      () => {
        // Each retry waits only what is left, not the whole wait again.
        const left = waitMs === null ? null : Math.max(0, Math.floor(waitMs - (now() - started)));
        const body: Record<string, unknown> = {
          sessionId: String(s.id),
          names,
          requestId,
          seq: String(ticket.seq),
          ackedBelow: String(ticket.ackedBelow()),
          inFlight: ticket.inFlight(),
        };
        if (left !== null) body.waitTimeoutMs = String(left);
        if (metadata.length > 0) body.metadata = b64(metadata);
        return { body, timeoutMs: attemptTimeout + (left ?? 0) };
      },
      { deadlineMs: s.cluster.options.deadlineMs + (waitMs ?? 0), signal: o.signal },
    );
    if (r.acquired) return new LockSet(s, (r.grants ?? []).map((g) => new LockGuard(s, grantFrom(g), started)));
    if (waitMs === null) return null;
    throw timedOut(names);
  } catch (e) {
    if (e instanceof SessionGone) s.markGone(e);
    if (waitMs !== null && o.signal?.aborted) cancelWaitSoon(s, names, requestId);
    throw e;
  } finally {
    ticket.done();
  }
}
