/**
 * Typed errors, one class per kind of refusal, chosen by the server's
 * machine-readable `reason` (and, for answers without one, by the gRPC code
 * alone). Messages are for people: nothing here, nor in code using this
 * library, should ever parse them.
 *
 * @example
 * ```ts
 * import { StaleToken, WaitTimedOut, RaftlockError } from "raftlock";
 * try {
 *   await session.lock("deploy", { timeoutMs: 5_000 });
 * } catch (e) {
 *   if (e instanceof WaitTimedOut) console.log("still busy");
 *   else if (e instanceof RaftlockError) console.log(e.code, e.reason);
 *   else throw e;
 * }
 * ```
 * @packageDocumentation
 */

import { REASON_CODES, REASONS, type Reason } from "./reasons";

// The reasons are generated from proto/proto/raftlock/v1/reasons.proto.
export { REASON_CODES, REASONS, type Reason };

/**
 * The JSON body of a refusal, as the server sends it (and as `observe`
 * streams end with).
 *
 * @example
 * ```ts
 * const body: ErrorBody = { code: "FAILED_PRECONDITION", reason: "STALE_TOKEN", message: "..." };
 * ```
 */
export interface ErrorBody {
  /** The gRPC code's name (`FAILED_PRECONDITION`). */
  code?: string;
  /** The machine-readable reason; empty for calls that do not exist. */
  reason?: string;
  /** For people. */
  message?: string;
  /** The leader's client address, when the answering node does not lead. */
  leader?: string;
}

/**
 * What the constructors take.
 *
 * @example
 * ```ts
 * new NotHolder("lock x was released", { code: "FAILED_PRECONDITION", reason: "NOT_HOLDER" });
 * ```
 */
export interface ErrorInit {
  /** gRPC code name. */
  code?: string;
  /** Server reason; `null` for verdicts this client made itself. */
  reason?: Reason | null;
  /** Leader hint from a follower's refusal. */
  leader?: string;
  /** HTTP status of the answer, when there was one. */
  httpStatus?: number;
  /** The error this one wraps. */
  cause?: unknown;
}

/**
 * Base class of every error this library throws.
 *
 * `code` is the gRPC code name of the answer (`FAILED_PRECONDITION`,
 * `UNAVAILABLE`, ...) or, for verdicts the client makes itself, the code the
 * server would have used. `reason` is the server's machine-readable reason,
 * or `null` when no server said it (a lost session, a connection refused).
 *
 * @example
 * ```ts
 * try { await guard.release(); }
 * catch (e) { if (e instanceof RaftlockError && e.reason === "STALE_TOKEN") { ... } }
 * ```
 */
export class RaftlockError extends Error {
  /** gRPC code name. */
  readonly code: string;
  /** The server's reason, or `null`. */
  readonly reason: Reason | null;
  /** The leader's address a follower named, if any. */
  readonly leader: string | undefined;
  /** The HTTP status of the answer, if there was an answer. */
  readonly httpStatus: number | undefined;
  /** The underlying error (a socket error, the last retryable refusal). */
  readonly cause: unknown;

  constructor(message: string, init: ErrorInit = {}) {
    super(message);
    this.name = new.target.name;
    this.code = init.code ?? "UNKNOWN";
    this.reason = init.reason ?? null;
    this.leader = init.leader;
    this.httpStatus = init.httpStatus;
    this.cause = init.cause;
  }

  /**
   * Whether trying the same thing again later may succeed (the client has
   * already retried until its deadline).
   *
   * @example
   * ```ts
   * if (e instanceof RaftlockError && e.retryable) setTimeout(retry, 1000);
   * ```
   */
  get retryable(): boolean {
    return this instanceof Unavailable;
  }
}

/**
 * No node could serve the call before its deadline: no leader, no quorum,
 * nodes unreachable or stopping. `reason` is the last refusal's, if any.
 *
 * @example
 * ```ts
 * if (e instanceof Unavailable) console.log("cluster down, retry later");
 * ```
 */
export class Unavailable extends RaftlockError {}

/**
 * The client was closed; nothing more can be done through it.
 *
 * @example
 * ```ts
 * await client.close();
 * await client.session().catch((e) => e instanceof ClientClosed); // true
 * ```
 */
export class ClientClosed extends RaftlockError {}

/**
 * The session no longer counts as valid here: no keep-alive was
 * acknowledged within TTL − margin, the credentials stopped working, or the
 * server says it is gone ({@link SessionGone}). Stop acting on its locks;
 * it never becomes valid again.
 *
 * @example
 * ```ts
 * const reason = await guard.lost;
 * if (reason instanceof SessionLost) stopWriting();
 * ```
 */
export class SessionLost extends RaftlockError {}

/**
 * The server says the session does not exist (expired or closed), or this
 * client closed it.
 *
 * @example
 * ```ts
 * if (e instanceof SessionGone) session = await client.session();
 * ```
 */
export class SessionGone extends SessionLost {}

/**
 * The lock's hold cap ran out (by the local clock, a safety margin before
 * the leader releases it): the lock can no longer be claimed, though its
 * session may live on. A {@link SessionLost}, so that code stopping on a
 * lost session stops on this too.
 *
 * @example
 * ```ts
 * const reason = await guard.lost;
 * if (reason instanceof HoldExpired) console.log("held for as long as allowed");
 * ```
 */
export class HoldExpired extends SessionLost {}

/**
 * {@link withLock} rejects with this when the lock was lost (its session
 * lost, or its hold cap run out) while its function ran; `cause` is why.
 * The function's `signal` was aborted at the same moment. A
 * {@link SessionLost}, so that code stopping on a lost session stops on
 * this too.
 *
 * @example
 * ```ts
 * try { await withLock(session, "reports/daily", work); } catch (e) { if (e instanceof LockLost) console.log("lost:", e.cause); }
 * ```
 */
export class LockLost extends SessionLost {}

/**
 * A wait for a lock or a leadership ended without it.
 *
 * @example
 * ```ts
 * await session.lock("deploy", { timeoutMs: 100 }).catch((e) => e instanceof WaitTimedOut);
 * ```
 */
export class WaitTimedOut extends RaftlockError {}

/**
 * A request field was refused as malformed or out of range.
 *
 * @example
 * ```ts
 * if (e instanceof InvalidArgument) console.error("bug in the caller", e.message);
 * ```
 */
export class InvalidArgument extends RaftlockError {}

/**
 * A lock or election name the server does not accept (empty, longer than
 * 512 bytes, control characters).
 *
 * @example
 * ```ts
 * await session.lock("").catch((e) => e instanceof InvalidName); // true
 * ```
 */
export class InvalidName extends InvalidArgument {}

/**
 * A session TTL outside the cluster's range (1 s to 10 min by default).
 *
 * @example
 * ```ts
 * await client.session({ ttlMs: 10 }).catch((e) => e instanceof TtlOutOfRange); // true
 * ```
 */
export class TtlOutOfRange extends InvalidArgument {}

/**
 * The session does not hold the lock (released, force-released, or the
 * session expired and came back under the same id — it cannot).
 *
 * @example
 * ```ts
 * await guard.release().catch((e) => e instanceof NotHolder);
 * ```
 */
export class NotHolder extends RaftlockError {}

/**
 * The session holds the lock under another token than the one given: this
 * grant is stale.
 *
 * @example
 * ```ts
 * if (e instanceof StaleToken) console.log("an older grant of mine");
 * ```
 */
export class StaleToken extends RaftlockError {}

/**
 * A stated permit count differs from the semaphore's.
 *
 * @example
 * ```ts
 * await s.lock("pool", { permits: 2 }).catch((e) => e instanceof PermitsMismatch);
 * ```
 */
export class PermitsMismatch extends RaftlockError {}

/**
 * The session already holds the lock through another acquisition.
 *
 * @example
 * ```ts
 * await s.lock("a"); await s.lock("a").catch((e) => e instanceof AlreadyHeld); // true
 * ```
 */
export class AlreadyHeld extends RaftlockError {}

/**
 * The session already waits for the lock through another acquisition.
 *
 * @example
 * ```ts
 * if (e instanceof AlreadyWaiting) console.log("one wait per session and lock");
 * ```
 */
export class AlreadyWaiting extends RaftlockError {}

/**
 * No such wait to cancel.
 *
 * @example
 * ```ts
 * if (e instanceof WaitNotFound) console.log("already granted or gone");
 * ```
 */
export class WaitNotFound extends RaftlockError {}

/**
 * A retry of a request that was settled since (`REQUEST_RELEASED`,
 * `REQUEST_FINISHED`, `REQUEST_ACKNOWLEDGED`): it is never executed twice.
 *
 * @example
 * ```ts
 * if (e instanceof RequestSettled) console.log(e.reason);
 * ```
 */
export class RequestSettled extends RaftlockError {}

/**
 * A limit of the cluster's was hit (sessions per identity, requests per
 * connection, as many rate limits as the cluster keeps, ...). Subclasses
 * name the common ones.
 *
 * @example
 * ```ts
 * if (e instanceof LimitExceeded) await backOff();
 * ```
 */
export class LimitExceeded extends RaftlockError {}

/**
 * The lock has as many waiters as the cluster allows.
 *
 * @example
 * ```ts
 * if (e instanceof TooManyWaiters) console.log("queue full");
 * ```
 */
export class TooManyWaiters extends LimitExceeded {}

/**
 * The cluster, or this session, has as many locks as allowed.
 *
 * @example
 * ```ts
 * if (e instanceof TooManyLocks) console.log("release some first");
 * ```
 */
export class TooManyLocks extends LimitExceeded {}

/**
 * The session has as many unanswered requests as allowed.
 *
 * @example
 * ```ts
 * if (e instanceof TooManyUnacknowledged) console.log("too many calls in flight");
 * ```
 */
export class TooManyUnacknowledged extends LimitExceeded {}

/**
 * The cluster's leader is short of disk space: new sessions, acquires and
 * takes are refused until an operator frees some; releases and keep-alives
 * go on.
 *
 * @example
 * ```ts
 * if (e instanceof NoSpace) console.log("the cluster is out of disk space");
 * ```
 */
export class NoSpace extends LimitExceeded {}

/**
 * No rate limit of this name, and the call did not say how to create it
 * (give `rate` to {@link Client.rateLimit}).
 *
 * @example
 * ```ts
 * await client.rateLimit("unknown").tryTake().catch((e) => e instanceof LimitNotFound); // true
 * ```
 */
export class LimitNotFound extends RaftlockError {}

/**
 * A rate limit of this name exists with other parameters (rate, period or
 * burst) than the ones given, or a take asks for more tokens than the
 * existing limit's burst (it could never be admitted).
 *
 * @example
 * ```ts
 * if (e instanceof LimitConflict) console.log("defined elsewhere with other parameters");
 * ```
 */
export class LimitConflict extends RaftlockError {}

/**
 * The cluster does not know who this client is (no token, or an unknown
 * one).
 *
 * @example
 * ```ts
 * await Client.connect(endpoints).catch((e) => e instanceof Unauthenticated);
 * ```
 */
export class Unauthenticated extends RaftlockError {}

/**
 * This client's identity may not do this (no right on the name, or someone
 * else's session).
 *
 * @example
 * ```ts
 * await s.lock("team-b/x").catch((e) => e instanceof PermissionDenied);
 * ```
 */
export class PermissionDenied extends RaftlockError {}

/**
 * A membership change refused, or a learner that did not catch up.
 *
 * @example
 * ```ts
 * if (e instanceof MembershipError) console.log(e.reason);
 * ```
 */
export class MembershipError extends RaftlockError {}

/**
 * A watch could not resume where it left off: the node no longer remembers
 * lock events that far back. Read the state afresh and watch from now.
 *
 * @example
 * ```ts
 * if (e instanceof WatchCompacted) await resync();
 * ```
 */
export class WatchCompacted extends RaftlockError {}

/**
 * A fault of the server's own.
 *
 * @example
 * ```ts
 * if (e instanceof InternalError) reportBug(e);
 * ```
 */
export class InternalError extends RaftlockError {}

/**
 * Any other answer: a reason this library does not know (a newer server),
 * or a refusal without one (a proxy, an unknown path).
 *
 * @example
 * ```ts
 * if (e instanceof ServerError) console.log(e.code, e.httpStatus);
 * ```
 */
export class ServerError extends RaftlockError {}

type ErrorClass = new (message: string, init?: ErrorInit) => RaftlockError;

// The class of each reason that has one of its own; a reason without one
// (a newer server's, say) gets the class of its code (BY_CODE).
const BY_REASON: Partial<Record<Reason, ErrorClass>> = {
  NOT_LEADER: Unavailable,
  NO_QUORUM: Unavailable,
  STOPPING: Unavailable,
  INVALID_NAME: InvalidName,
  TTL_OUT_OF_RANGE: TtlOutOfRange,
  INVALID_ARGUMENT: InvalidArgument,
  SESSION_NOT_FOUND: SessionGone,
  WAIT_NOT_FOUND: WaitNotFound,
  NOT_HOLDER: NotHolder,
  STALE_TOKEN: StaleToken,
  PERMITS_MISMATCH: PermitsMismatch,
  REQUEST_RELEASED: RequestSettled,
  REQUEST_FINISHED: RequestSettled,
  REQUEST_ACKNOWLEDGED: RequestSettled,
  ALREADY_HELD: AlreadyHeld,
  ALREADY_WAITING: AlreadyWaiting,
  WAIT_CANCELLED: WaitTimedOut,
  WAIT_TIMED_OUT: WaitTimedOut,
  TOO_MANY_WAITERS: TooManyWaiters,
  TOO_MANY_LOCKS: TooManyLocks,
  TOO_MANY_UNACKNOWLEDGED: TooManyUnacknowledged,
  LIMIT_EXCEEDED: LimitExceeded,
  NO_SPACE: NoSpace,
  UNAUTHENTICATED: Unauthenticated,
  PERMISSION_DENIED: PermissionDenied,
  MEMBERSHIP_CHANGE_REFUSED: MembershipError,
  LEARNER_NOT_CAUGHT_UP: MembershipError,
  WATCH_COMPACTED: WatchCompacted,
  INTERNAL: InternalError,
  LIMIT_NOT_FOUND: LimitNotFound,
  LIMIT_CONFLICT: LimitConflict,
};

/** The gRPC code an HTTP status stands for, for answers without a JSON body
 * (a proxy's 502, say). */
function codeOfStatus(status: number): string {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "ALREADY_EXISTS";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 502:
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return status >= 500 ? "UNKNOWN" : "UNKNOWN";
  }
}

function isReason(r: unknown): r is Reason {
  return typeof r === "string" && Object.prototype.hasOwnProperty.call(REASON_CODES, r);
}

/** The class of a reason's code, for reasons without a class of their own. */
function classOfCode(code: string): ErrorClass {
  switch (code) {
    case "UNAVAILABLE":
      return Unavailable;
    case "INVALID_ARGUMENT":
      return InvalidArgument;
    case "RESOURCE_EXHAUSTED":
      return LimitExceeded;
    case "UNAUTHENTICATED":
      return Unauthenticated;
    case "PERMISSION_DENIED":
      return PermissionDenied;
    default:
      return ServerError;
  }
}

/**
 * The typed error for a refusal: by its reason when it has one raftlock
 * knows, else by its code alone (never by its message).
 *
 * @example
 * ```ts
 * const e = errorFromBody({ code: "FAILED_PRECONDITION", reason: "STALE_TOKEN", message: "..." }, 409);
 * e instanceof StaleToken; // true
 * ```
 */
export function errorFromBody(body: ErrorBody, httpStatus?: number): RaftlockError {
  const code = body.code || (httpStatus !== undefined ? codeOfStatus(httpStatus) : "UNKNOWN");
  const message = body.message || `${code}${httpStatus !== undefined ? ` (HTTP ${httpStatus})` : ""}`;
  const init: ErrorInit = { code, leader: body.leader || undefined, httpStatus };
  if (isReason(body.reason)) {
    const cls = BY_REASON[body.reason] ?? classOfCode(REASON_CODES[body.reason]);
    return new cls(message, { ...init, reason: body.reason });
  }
  // No reason raftlock knows: a proxy, the transport, an older or newer
  // server. Only codes that carry no verdict are read as unavailability.
  switch (code) {
    case "UNAVAILABLE":
    case "UNKNOWN":
    case "CANCELLED":
    case "ABORTED":
    case "DEADLINE_EXCEEDED":
      return new Unavailable(message, init);
    case "UNAUTHENTICATED":
      return new Unauthenticated(message, init);
    case "PERMISSION_DENIED":
      return new PermissionDenied(message, init);
    default:
      return new ServerError(message, init);
  }
}
