package io.github.raftlock;

/**
 * The election has no leader now.
 *
 * <pre>{@code
 * try {
 *     Grant leader = client.electionLeader("svc/primary");
 * } catch (NoLeaderException e) {
 *     // nobody leads yet
 * }
 * }</pre>
 */
public class NoLeaderException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    NoLeaderException(ErrorInfo info) {
        super(info);
    }
}
