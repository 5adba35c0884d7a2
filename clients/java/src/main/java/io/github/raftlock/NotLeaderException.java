package io.github.raftlock;

/**
 * Reason {@link Reason#NOT_LEADER}: This node does not lead; the leader's address, when
 * known, is in the raftlock-leader metadata key.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (NotLeaderException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class NotLeaderException extends UnavailableException {
    private static final long serialVersionUID = 1L;

    NotLeaderException(ErrorInfo info) {
        super(info);
    }
}
