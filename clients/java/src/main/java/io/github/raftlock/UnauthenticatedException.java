package io.github.raftlock;

/**
 * Reason {@link Reason#UNAUTHENTICATED}: No credentials, or unknown ones.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (UnauthenticatedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class UnauthenticatedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    UnauthenticatedException(ErrorInfo info) {
        super(info);
    }
}
