//! Bounds on what a client may ask for. The state machine enforces them (so
//! every replica agrees), and clients check them before sending.
//!
//! They are constants, not configuration: the state machine must apply the
//! same entry the same way on every node, so a limit that decides an
//! outcome cannot differ between nodes.

/// Shortest session TTL, in ms. Shorter leases would expire on ordinary
/// network jitter and scheduling pauses.
pub const MIN_TTL_MS: u64 = 1_000;
/// Longest session TTL, in ms. A dead client holds its locks at most this long.
pub const MAX_TTL_MS: u64 = 600_000;
/// Longest lock name, in bytes of UTF-8.
pub const MAX_NAME_LEN: usize = 512;
/// Longest client name of a session, in bytes.
pub const MAX_CLIENT_NAME_LEN: usize = 256;
/// Largest metadata (or election value) stored with a grant, in bytes.
pub const MAX_METADATA_LEN: usize = 4_096;
/// Length of a request id, in bytes (a UUID).
pub const REQUEST_ID_LEN: usize = 16;
/// Most waiters queued on one lock.
pub const MAX_WAITERS_PER_LOCK: usize = 10_000;
/// Most locks one AcquireAll takes together.
pub const MAX_LOCKS_PER_SET: usize = 64;
/// Most locks one session may hold or wait for at once.
pub const MAX_LOCKS_PER_SESSION: usize = 10_000;
/// Most holders a BUSY answer names: the oldest grants of the lock in the
/// way (Describe lists them all). A retried try-lock is answered with the
/// holders it was first answered with, so each session's unacknowledged
/// answers keep up to this many grants (without their metadata).
pub const MAX_BUSY_HOLDERS: usize = 16;
/// Longest wait an Acquire may ask for, in ms.
pub const MAX_WAIT_MS: u64 = 3_600_000;
/// How many finished request ids of acquisitions that were not numbered a
/// session remembers, so that a late retry of one that was already released
/// is refused rather than granted a second time. (A numbered acquisition's
/// end is kept with its exactly-once answer instead.)
pub const FINISHED_REQUESTS_PER_SESSION: usize = 256;
/// Most sequenced requests of one session whose answers the client has not
/// acknowledged yet (requests in flight at once, in practice).
pub const MAX_UNACKED_REQUESTS_PER_SESSION: usize = 4_096;
/// Most sequence numbers one request may list as still in flight
/// (`in_flight`); a client with more lists its lowest ones.
pub const MAX_IN_FLIGHT_LISTED: usize = 1_024;
/// Most separate runs of acknowledged sequence numbers above a session's
/// `acked_below` (each run is cut off by a call still in flight).
pub const MAX_ACK_RANGES_PER_SESSION: usize = 4_096;
/// Default and largest page of a List call.
pub const DEFAULT_LIST_LIMIT: u32 = 100;
/// Largest page of a List call.
pub const MAX_LIST_LIMIT: u32 = 1_000;
/// Shortest hold cap an Acquire may set, in ms: a shorter one would end
/// holds on ordinary network jitter, before a client could use them.
pub const MIN_HOLD_MS: u64 = 1_000;
/// Longest hold cap an Acquire may set, in ms (a week).
pub const MAX_HOLD_MS: u64 = 604_800_000;
/// Longest lock-delay an Acquire may set, in ms (Consul caps it at the
/// same minute): long enough for a holder that lost its lock to stop, short
/// enough that a lost session does not stall everyone behind it for long.
pub const MAX_LOCK_DELAY_MS: u64 = 60_000;
/// Most semaphores whose size was set by Resize (sizes outlive holders).
pub const MAX_SIZED_LOCKS: usize = 100_000;
/// Most rate limits a cluster keeps (they outlive sessions).
pub const MAX_RATE_LIMITS: usize = 100_000;
/// Largest burst of a rate limit, and most tokens one take asks for.
pub const MAX_BURST: u64 = 1_000_000_000;
/// Largest rate of a rate limit, tokens per period.
pub const MAX_RATE: u64 = 1_000_000_000;
/// Longest period of a rate limit (a day), in ms.
pub const MAX_RATE_PERIOD_MS: u64 = 86_400_000;
/// Longest validity of a block of tokens reserved for spending locally,
/// in ms: the over-admission bound grows with it.
pub const MAX_TOKEN_LEASE_MS: u64 = 10_000;
/// Most token leases of one rate limit outstanding at once (a lease's
/// record stays for its validity and a few seconds after).
pub const MAX_TOKEN_LEASES_PER_LIMIT: usize = 100_000;
