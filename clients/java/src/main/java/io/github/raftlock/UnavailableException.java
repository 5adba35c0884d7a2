package io.github.raftlock;

/**
 * Nothing was decided: no node could serve the call before its time ran out (no leader,
 * no quorum, unreachable, stopping). The client already retried with backoff, following
 * the leader; {@link NotLeaderException}, {@link NoQuorumException} and
 * {@link StoppingException} are kinds of it.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (UnavailableException e) {
 *     // the cluster is down or cut off; retry later
 * }
 * }</pre>
 */
public class UnavailableException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    UnavailableException(ErrorInfo info) {
        super(info);
    }
}
