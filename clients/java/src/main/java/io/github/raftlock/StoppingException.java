package io.github.raftlock;

/**
 * Reason {@link Reason#STOPPING}: The node is stopping.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (StoppingException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class StoppingException extends UnavailableException {
    private static final long serialVersionUID = 1L;

    StoppingException(ErrorInfo info) {
        super(info);
    }
}
