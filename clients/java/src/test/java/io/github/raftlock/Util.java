package io.github.raftlock;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

/** Helpers of the tests. */
final class Util {
    private Util() {}

    static void eventually(String what, Duration within, BooleanSupplier ok) throws InterruptedException {
        long end = System.nanoTime() + within.toNanos();
        while (System.nanoTime() < end) {
            if (ok.getAsBoolean()) {
                return;
            }
            Thread.sleep(20);
        }
        fail("not within " + within + ": " + what);
    }

    static List<Long> waiters(RaftlockClient c, String name) {
        try {
            return c.describe(name).waiters().stream().map(LockInfo.Waiter::sessionId).collect(Collectors.toList());
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    static List<Long> holders(RaftlockClient c, String name) {
        try {
            return c.describe(name).holders().stream().map(Grant::sessionId).collect(Collectors.toList());
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
