package io.github.raftlock;

/**
 * Reason {@link Reason#REQUEST_ACKNOWLEDGED}: A request number the client said it had
 * its answer for.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (RequestAcknowledgedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class RequestAcknowledgedException extends RequestSettledException {
    private static final long serialVersionUID = 1L;

    RequestAcknowledgedException(ErrorInfo info) {
        super(info);
    }
}
