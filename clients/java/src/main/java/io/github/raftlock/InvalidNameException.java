package io.github.raftlock;

/**
 * Reason {@link Reason#INVALID_NAME}: A lock or election name is empty, too long or not
 * acceptable.
 *
 * <pre>{@code
 * try {
 *     session.lock("").tryLock();
 * } catch (InvalidNameException e) {
 *     // e.reason() == Reason.INVALID_NAME
 * }
 * }</pre>
 */
public class InvalidNameException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    InvalidNameException(ErrorInfo info) {
        super(info);
    }
}
