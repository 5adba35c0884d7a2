package io.github.raftlock;

/**
 * Reason {@link Reason#WATCH_COMPACTED}: A watch asked to resume after an index this
 * node no longer remembers events for (or its history was reset by a snapshot): read the
 * state afresh and watch from now.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (WatchCompactedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class WatchCompactedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    WatchCompactedException(ErrorInfo info) {
        super(info);
    }
}
