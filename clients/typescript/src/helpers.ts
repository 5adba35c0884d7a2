/**
 * `withLock`: acquire, run, release — the shape most lock uses take, with
 * the release in a `finally` (TypeScript 4.8 has no `await using`).
 * @packageDocumentation
 */

import { Client } from "./client";
import { LockLost } from "./errors";
import type { LockGuard, LockOptions } from "./lock";
import type { Session } from "./session";

/**
 * Options of {@link withLock}: the lock's, plus the TTL of the session it
 * creates when given a {@link Client}.
 *
 * @example
 * ```ts
 * const opts: WithLockOptions = { timeoutMs: 5_000, ttlMs: 10_000 };
 * ```
 */
export interface WithLockOptions extends LockOptions {
  /** TTL of the session created for the call when `target` is a client (default 10 000). */
  ttlMs?: number;
}

/**
 * Acquires lock `name`, runs `fn(guard, signal)`, and releases the lock
 * however `fn` ends; resolves with what `fn` returned. Given a
 * {@link Client}, it creates a session for the call and closes it
 * afterwards. `fn` should pass `guard.token` to what it writes.
 *
 * The lock scopes `fn`: when the lock is lost while `fn` runs (its session
 * lost, or its hold cap run out, by the same deadline as `guard.valid`:
 * before anyone else can be granted it), `signal` is aborted with the
 * reason and `withLock` rejects at once with {@link LockLost} (its `cause`
 * the reason), without waiting for `fn`: pass `signal` to what `fn` awaits
 * (`fetch`, timers, streams) so that it stops too. An error from `fn` wins
 * over one from the release.
 *
 * @example
 * ```ts
 * const total = await withLock(session, "ledger/2024", async (guard, signal) => {
 *   return ledger.settle({ fence: guard.token, signal });
 * }, { timeoutMs: 5_000 });
 * ```
 */
export async function withLock<T>(
  target: Session | Client,
  name: string,
  fn: (guard: LockGuard, signal: AbortSignal) => Promise<T> | T,
  options: WithLockOptions = {},
): Promise<T> {
  if (target instanceof Client) {
    const session = await target.session({ ttlMs: options.ttlMs });
    try {
      return await withLock(session, name, fn, options);
    } finally {
      await session.close().catch(() => undefined);
    }
  }
  const { ttlMs: _ttl, ...lockOptions } = options;
  const guard = await target.lock(name, lockOptions);
  const scope = new AbortController();
  let running = true;
  const lost = guard.lost.then((reason): never => {
    if (running) scope.abort(reason);
    throw new LockLost(`lock ${JSON.stringify(name)} was lost while its function ran: ${reason.message}`, {
      code: reason.code,
      reason: reason.reason,
      cause: reason,
    });
  });
  // Settled either way once fn is done: never an unhandled rejection.
  lost.catch(() => undefined);
  let failed = false;
  try {
    const body = Promise.resolve().then(() => fn(guard, scope.signal));
    // fn's own outcome after a loss is nobody's business but fn's.
    body.catch(() => undefined);
    return await Promise.race([body, lost]);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    running = false;
    try {
      await guard.release();
    } catch (e) {
      if (!failed) throw e;
    }
  }
}
