package io.github.raftlock;

/**
 * Reason {@link Reason#NO_QUORUM}: No quorum answered in time.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (NoQuorumException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class NoQuorumException extends UnavailableException {
    private static final long serialVersionUID = 1L;

    NoQuorumException(ErrorInfo info) {
        super(info);
    }
}
