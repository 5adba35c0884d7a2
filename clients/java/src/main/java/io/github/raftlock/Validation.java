package io.github.raftlock;

/**
 * The answer to {@link RaftlockClient#validate(String, long)}.
 *
 * <pre>{@code
 * Validation v = client.validate("jobs/a", token);
 * if (!v.valid()) throw new IllegalStateException("superseded by " + v.currentToken());
 * }</pre>
 *
 * @param valid a current holder of the lock holds this token
 * @param currentToken the highest token among the current holders (0: none)
 */
public record Validation(boolean valid, long currentToken) {}
