package io.github.raftlock;

/**
 * Reason {@link Reason#NO_SPACE}: The leader's data dir is below its free-space reserve:
 * calls that grow the state (new sessions, acquires, campaigns, takes) are refused until
 * space returns; releases, closes and keep-alives go on. HTTP 507 says what happened
 * better than 429, which asks to retry soon.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (NoSpaceException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class NoSpaceException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    NoSpaceException(ErrorInfo info) {
        super(info);
    }
}
