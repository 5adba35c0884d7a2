/**
 * `withLock`: acquire, run, release — the shape most lock uses take, with
 * the release in a `finally` (TypeScript 4.8 has no `await using`).
 * @packageDocumentation
 */

import { Client } from "./client";
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
 * Acquires lock `name`, runs `fn(guard)`, and releases the lock however
 * `fn` ends; resolves with what `fn` returned. Given a {@link Client}, it
 * creates a session for the call and closes it afterwards. `fn` should
 * pass `guard.token` to what it writes and may watch `guard.lost` or check
 * `guard.valid` between steps. An error from `fn` wins over one from the
 * release.
 *
 * @example
 * ```ts
 * const total = await withLock(session, "ledger/2024", async (guard) => {
 *   return ledger.settle({ fence: guard.token });
 * }, { timeoutMs: 5_000 });
 * ```
 */
export async function withLock<T>(
  target: Session | Client,
  name: string,
  fn: (guard: LockGuard) => Promise<T> | T,
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
  let failed = false;
  try {
    return await fn(guard);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    try {
      await guard.release();
    } catch (e) {
      if (!failed) throw e;
    }
  }
}
