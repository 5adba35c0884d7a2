package io.github.raftlock;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.Instant;

/**
 * A client process of its own for PausedHolderTest: takes lock NAME with a 2 s session and
 * logs, every 10 ms while its body runs under {@link LockGuard#runWhileHeld}, whether it
 * counts on the lock and until when (moved onto the wall clock the test shares), then how
 * the body ended.
 */
public final class HolderMain {
    private HolderMain() {}

    static long wallNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    public static void main(String[] args) throws Exception {
        String endpoints = args[0];
        String name = args[1];
        try (PrintWriter out = new PrintWriter(new FileWriter(args[2], true), true);
             RaftlockClient client = RaftlockClient.builder().endpoints(endpoints).build();
             Session s = client.newSession(Duration.ofSeconds(2))) {
            LockGuard g = s.lock(name).acquire();
            out.println("held " + g.token() + " " + wallNanos());
            try {
                g.runWhileHeld(() -> {
                    while (true) {
                        // Read before the check, so that a pause after the check cannot
                        // make a tick look later than it was.
                        long wall = wallNanos();
                        long mono = System.nanoTime();
                        long until = g.validUntilNanos();
                        boolean valid = g.isValid();
                        out.println("tick " + wall + " " + (valid ? 1 : 0) + " " + (wall + (until - mono)));
                        Thread.sleep(10);
                    }
                });
            } catch (SessionLostException e) {
                out.println("lost " + wallNanos() + " true");
            } catch (IOException | RuntimeException e) {
                out.println("lost " + wallNanos() + " false " + e);
            }
        }
    }
}
