package io.github.raftlock;

/**
 * The work a {@link LeaderSelector} runs while it leads, as Curator's
 * {@code LeaderSelectorListener}: leadership lasts until
 * {@link #takeLeadership(Election)} returns.
 *
 * <pre>{@code
 * LeaderSelectorListener work = election -> {
 *     while (!Thread.currentThread().isInterrupted()) compactOnce(election.token());
 * };
 * }</pre>
 */
@FunctionalInterface
public interface LeaderSelectorListener {
    /**
     * Runs while this instance leads; return to give leadership up. The thread is
     * interrupted when leadership is lost (the session's local deadline passed, a safety
     * margin before the leader could expire it) or the selector closes: stop then.
     *
     * @param election the won election (its {@link Election#token()} fences writes; its
     *     {@link Election#proclaim(String)} publishes a new value)
     * @throws Exception whatever the work fails with; leadership is given up then too
     */
    void takeLeadership(Election election) throws Exception;
}
