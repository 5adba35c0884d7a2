package io.github.raftlock;

/**
 * Learns when a {@link LeaderLatch} gains and loses leadership, as Curator's
 * {@code LeaderLatchListener}. Called on a worker thread of the client, in order.
 *
 * <pre>{@code
 * latch.addListener(new LeaderLatchListener() {
 *     public void isLeader() { scheduler.start(); }
 *     public void notLeader() { scheduler.stop(); }
 * });
 * }</pre>
 */
public interface LeaderLatchListener {
    /** Called when the latch becomes leader. */
    void isLeader();

    /** Called when it stops leading: closed, or its session lost. */
    void notLeader();
}
