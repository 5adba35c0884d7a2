package io.github.raftlock;

/**
 * Reason {@link Reason#LEARNER_NOT_CAUGHT_UP}: A new learner did not catch up with the
 * log in time.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (LearnerNotCaughtUpException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class LearnerNotCaughtUpException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    LearnerNotCaughtUpException(ErrorInfo info) {
        super(info);
    }
}
