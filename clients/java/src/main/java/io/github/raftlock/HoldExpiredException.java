package io.github.raftlock;

/**
 * A lock's hold cap (the lease time of {@code tryLock(wait, lease, unit)}) ran out, by the
 * local clock, a safety margin before the leader releases it.
 *
 * <pre>{@code
 * try {
 *     guard.runWhileHeld(() -> longJob(guard.token()));
 * } catch (HoldExpiredException e) {
 *     // the lease time given at acquisition was too short for the job
 * }
 * }</pre>
 */
public class HoldExpiredException extends SessionLostException {
    private static final long serialVersionUID = 1L;

    HoldExpiredException(ErrorInfo info) {
        super(info);
    }
}
