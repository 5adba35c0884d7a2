package io.github.raftlock;

/**
 * Reason {@link Reason#STALE_TOKEN}: The session holds the lock under another token.
 *
 * <pre>{@code
 * try {
 *     session.release("jobs/a", oldToken);
 * } catch (StaleTokenException e) {
 *     // this session holds the lock under a newer token
 * }
 * }</pre>
 */
public class StaleTokenException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    StaleTokenException(ErrorInfo info) {
        super(info);
    }
}
