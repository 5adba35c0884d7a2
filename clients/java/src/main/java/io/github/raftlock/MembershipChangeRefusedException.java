package io.github.raftlock;

/**
 * Reason {@link Reason#MEMBERSHIP_CHANGE_REFUSED}: A membership change the cluster
 * refused (another one in progress, an unknown node).
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (MembershipChangeRefusedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class MembershipChangeRefusedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    MembershipChangeRefusedException(ErrorInfo info) {
        super(info);
    }
}
