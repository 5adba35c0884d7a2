package io.github.raftlock;

/**
 * Reason {@link Reason#REQUEST_FINISHED}: A retry of an acquisition that ended
 * otherwise.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (RequestFinishedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class RequestFinishedException extends RequestSettledException {
    private static final long serialVersionUID = 1L;

    RequestFinishedException(ErrorInfo info) {
        super(info);
    }
}
