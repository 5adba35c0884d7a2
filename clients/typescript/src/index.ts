/**
 * raftlock: a client for the raftlock lock service over its HTTP/JSON API,
 * with no dependencies beyond Node.
 *
 * - {@link Client}: connects, follows the leader, retries until a deadline.
 * - {@link Session}: a lease kept alive in the background, valid only until
 *   (send time of the last acknowledged keep-alive) + TTL − {@link safetyMargin}.
 * - {@link LockGuard}: a held lock with its fencing token, `valid`, `lost`.
 * - {@link LockSet}: several locks granted together ({@link Session.lockAll}).
 * - {@link Watch}: every change of lock holders under a prefix ({@link Client.watch}).
 * - {@link Leadership} and {@link Observation}: leader election.
 * - {@link withLock}: acquire, run, release.
 * - {@link RateLimit} and {@link TokenLease}: rate limits kept by the cluster.
 * - Typed errors: {@link RaftlockError} and its subclasses, by the server's reason.
 *
 * @example
 * ```ts
 * import { Client, withLock } from "raftlock";
 * const client = await Client.connect("127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002");
 * const session = await client.session({ ttlMs: 10_000 });
 * await withLock(session, "reports/daily", async (guard) => {
 *   await runReport({ fencingToken: guard.token });
 * });
 * await client.close();
 * ```
 * @packageDocumentation
 */

export { Client } from "./client";
export type { ClusterStatus, ForceReleased, LockInfo, LockSummary, Member, SessionInfo, SessionOptions, Validation, WaiterInfo } from "./client";
export type { Grant, LockMode } from "./codec";
export { Leadership, Observation } from "./election";
export type { CampaignOptions } from "./election";
export {
  AlreadyHeld,
  AlreadyWaiting,
  ClientClosed,
  HoldExpired,
  InternalError,
  LockLost,
  InvalidArgument,
  InvalidName,
  LimitConflict,
  LimitExceeded,
  LimitNotFound,
  MembershipError,
  NotHolder,
  PermissionDenied,
  PermitsMismatch,
  REASON_CODES,
  REASONS,
  RaftlockError,
  RequestSettled,
  ServerError,
  SessionGone,
  SessionLost,
  StaleToken,
  TooManyLocks,
  TooManyUnacknowledged,
  NoSpace,
  TooManyWaiters,
  TtlOutOfRange,
  Unauthenticated,
  Unavailable,
  WaitNotFound,
  WaitTimedOut,
  WatchCompacted,
  errorFromBody,
} from "./errors";
export type { ErrorBody, ErrorInit, Reason } from "./errors";
export { withLock } from "./helpers";
export type { WithLockOptions } from "./helpers";
export { safetyMargin } from "./lease";
export { LockGuard, MAX_WAIT_MS } from "./lock";
export type { LockOptions } from "./lock";
export { LockSet } from "./lockall";
export type { LockAllOptions } from "./lockall";
export { RateLimit, TokenLease } from "./ratelimit";
export type { Admission, LimitInfo, RateLimitOptions, TakeOptions } from "./ratelimit";
export { Session } from "./session";
export type { CallInfo, ClientOptions, Interceptor, TlsOptions } from "./transport";
export { Watch } from "./watch";
export type { LockEvent, LockEventKind, WatchBatch, WatchOptions } from "./watch";
