package io.github.raftlock;

/**
 * How a lock is held.
 *
 * <pre>{@code
 * if (guard.grant().mode() == LockMode.SHARED) readOnly();
 * }</pre>
 */
public enum LockMode {
    /** One holder, nobody beside it. */
    EXCLUSIVE,
    /** Any number of shared holders (up to a semaphore's permits), never beside an exclusive one. */
    SHARED;

    String wire() {
        return this == SHARED ? "LOCK_MODE_SHARED" : "LOCK_MODE_EXCLUSIVE";
    }

    static LockMode fromWire(String s) {
        return "LOCK_MODE_SHARED".equals(s) ? SHARED : EXCLUSIVE;
    }
}
