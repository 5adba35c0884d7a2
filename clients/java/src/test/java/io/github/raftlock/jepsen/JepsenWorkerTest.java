package io.github.raftlock.jepsen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The worker's side of the harness's contract: its command line and its history lines. */
class JepsenWorkerTest {
    @Test
    void readsTheHarnesssCommandLineGlobalFlagsIncluded() {
        JepsenWorker.Args a = JepsenWorker.parse(new String[] {
            "--raftlockd", "target/debug/raftlockd", "--out", "x", "--loopback-net", "127.0.40",
            "--client-worker", "w", "worker", "--endpoints", "127.0.40.11:1,127.0.40.12:2",
            "--workload", "mutex", "--seed", "31", "--clock-base", "12345", "--first-process",
            "1000000", "--local-address", "127.0.40.61"});
        assertEquals(List.of("127.0.40.11:1", "127.0.40.12:2"), a.endpoints());
        assertEquals("mutex", a.workload());
        assertEquals(31, a.seed());
        assertEquals(12345, a.clockBase());
        assertEquals(1_000_000, a.firstProcess());
        assertEquals("127.0.40.61", a.localAddress());
    }

    @Test
    void refusesWhatItCannotRun() {
        String[] base = {"worker", "--endpoints", "a:1", "--seed", "1", "--clock-base", "0", "--first-process", "0"};
        assertThrows(IllegalArgumentException.class, () -> JepsenWorker.parse(base), "no workload");
        String[] sem = {"worker", "--endpoints", "a:1", "--workload", "semaphore", "--seed", "1",
            "--clock-base", "0", "--first-process", "0"};
        assertThrows(IllegalArgumentException.class, () -> JepsenWorker.parse(sem));
        assertThrows(IllegalArgumentException.class, () -> JepsenWorker.parse(new String[] {"--seed", "1"}),
                "no worker subcommand");
        String[] neg = {"worker", "--endpoints", "a:1", "--workload", "mutex", "--seed", "-1",
            "--clock-base", "0", "--first-process", "0"};
        assertThrows(IllegalArgumentException.class, () -> JepsenWorker.parse(neg));
    }

    @Test
    void writesOpsAsTheHarnessReadsThem() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        JepsenWorker.Recorder rec = new JepsenWorker.Recorder(1_000, 7, new PrintStream(buf, true, StandardCharsets.UTF_8));
        assertEquals(7, rec.process());
        assertEquals(8, rec.process());
        JepsenWorker.Spec s = new JepsenWorker.Spec(7, "acquire", "mutex/0", 65536L);
        s.token = 196608L;
        s.validUntil = 5_000L;
        rec.recordAt("ok", s, null, 3_000);
        JepsenWorker.Spec c = new JepsenWorker.Spec(8, "close", "", null);
        rec.recordAt("info", c, "gone <&>", 500);
        String[] lines = buf.toString(StandardCharsets.UTF_8).split("\n");
        // Field for field and in order what serde writes for the harness's Op.
        assertEquals("{\"index\":0,\"time_ns\":2000,\"process\":7,\"type\":\"ok\",\"f\":\"acquire\","
                + "\"lock\":\"mutex/0\",\"session\":65536,\"token\":196608,\"valid_until_ns\":4000}", lines[0]);
        // Absent fields left out; a time before the harness's start is 0.
        assertEquals("{\"index\":0,\"time_ns\":0,\"process\":8,\"type\":\"info\",\"f\":\"close\",\"lock\":\"\","
                + "\"error\":\"gone <&>\"}", lines[1]);
    }
}
