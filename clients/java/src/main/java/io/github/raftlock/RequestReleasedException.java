package io.github.raftlock;

/**
 * Reason {@link Reason#REQUEST_RELEASED}: A retry of an acquisition that was granted and
 * has been released since.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (RequestReleasedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class RequestReleasedException extends RequestSettledException {
    private static final long serialVersionUID = 1L;

    RequestReleasedException(ErrorInfo info) {
        super(info);
    }
}
