package io.github.raftlock;

/**
 * Proclaim on an {@link Election} that does not lead.
 *
 * <pre>{@code
 * try {
 *     election.proclaim("10.0.0.7:8080");
 * } catch (NotLeadingException e) {
 *     // campaign first
 * }
 * }</pre>
 */
public class NotLeadingException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    NotLeadingException(ErrorInfo info) {
        super(info);
    }
}
