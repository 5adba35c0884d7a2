package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Go's TestPausedHolderSeesLostBeforeTheNextGrant in Java: a holder in a JVM of its own is
 * frozen (SIGSTOP) while it holds a lock, another session is granted the lock once the
 * server expired the frozen one, and when the holder resumes it must never have counted on
 * the lock past that grant, and its runWhileHeld body must end with the loss.
 */
class PausedHolderTest {
    private static List<String[]> lines(Path f) throws IOException {
        List<String[]> out = new ArrayList<>();
        if (!Files.exists(f)) {
            return out;
        }
        for (String l : Files.readAllLines(f)) {
            if (!l.isBlank()) {
                out.add(l.trim().split(" "));
            }
        }
        return out;
    }

    private static void signal(Process p, String sig) throws Exception {
        // Only the process this test started, by its PID.
        Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start();
        assertEquals(0, k.waitFor(), "kill -" + sig);
    }

    @Test
    void pausedHolderSeesLostBeforeTheNextGrant() throws Exception {
        TestCluster c = TestCluster.shared();
        Path out = Files.createTempFile("raftlock-holder", ".log");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                HolderMain.class.getName(), c.endpoints(), "pause/child", out.toString());
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(new File(out + ".stderr")));
        Process p = pb.start();
        try (RaftlockClient client = c.client(); Session other = client.newSession()) {
            eventually("the holder ticks", Duration.ofSeconds(20), () -> {
                try {
                    return lines(out).stream().anyMatch(l -> l[0].equals("tick"));
                } catch (IOException e) {
                    return false;
                }
            });
            signal(p, "STOP");
            long pausedAt = HolderMain.wallNanos();
            long grantedAt;
            try (LockGuard g = other.lock("pause/child").acquire(Duration.ofSeconds(30))) {
                grantedAt = HolderMain.wallNanos();
            } finally {
                signal(p, "CONT");
            }
            assertTrue(p.waitFor(15, TimeUnit.SECONDS), "the holder ends after it resumes");
            assertTrue(grantedAt - pausedAt >= TimeUnit.SECONDS.toNanos(1),
                    "granted " + (grantedAt - pausedAt) / 1_000_000 + " ms after the pause, within the holder's TTL");
            long lastValidDeadline = 0;
            boolean lost = false;
            for (String[] l : lines(out)) {
                if (l[0].equals("tick")) {
                    if (l[2].equals("1")) {
                        long at = Long.parseLong(l[1]);
                        if (at >= grantedAt) {
                            fail("the holder said valid at " + at + ", after the grant at " + grantedAt);
                        }
                        lastValidDeadline = Long.parseLong(l[3]);
                    }
                } else if (l[0].equals("lost")) {
                    lost = l[2].equals("true");
                }
            }
            assertTrue(lastValidDeadline != 0 && lastValidDeadline <= grantedAt,
                    "the holder counted on the lock until " + lastValidDeadline + ", the next grant was at " + grantedAt);
            // The body may be stopped before it ticks again: its last tick may be one from
            // before the pause, still valid then; what matters is how it ended.
            assertTrue(lost, "after the pause the holder's body must end with SessionLostException: "
                    + Files.readString(out) + Files.readString(Path.of(out + ".stderr")));
        } finally {
            if (p.isAlive()) {
                signal(p, "CONT");
                p.destroyForcibly();
            }
            Files.deleteIfExists(out);
            Files.deleteIfExists(Path.of(out + ".stderr"));
        }
    }
}
