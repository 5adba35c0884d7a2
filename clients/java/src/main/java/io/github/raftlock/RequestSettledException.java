package io.github.raftlock;

/**
 * A retried request that was settled since and is never executed twice: the kinds
 * {@link RequestReleasedException}, {@link RequestFinishedException} and
 * {@link RequestAcknowledgedException}.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (RequestSettledException e) {
 *     // an earlier attempt already got (and lost) its answer
 * }
 * }</pre>
 */
public class RequestSettledException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    RequestSettledException(ErrorInfo info) {
        super(info);
    }
}
