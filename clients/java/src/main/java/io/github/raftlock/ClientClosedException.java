package io.github.raftlock;

/**
 * The {@link RaftlockClient} was closed: calls still in flight end with this, and new ones
 * are refused.
 *
 * <pre>{@code
 * client.close();
 * session.lock("a").tryLock(); // throws ClientClosedException
 * }</pre>
 */
public class ClientClosedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    ClientClosedException(ErrorInfo info) {
        super(info);
    }
}
