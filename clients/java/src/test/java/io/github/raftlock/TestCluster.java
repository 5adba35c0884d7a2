package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Real raftlockd clusters for the tests: three processes on free loopback ports in a
 * temporary directory, killed by PID when closed. The binary is $RAFTLOCKD, else the
 * workspace's target/debug/raftlockd. A port of clients/go/internal/testcluster.
 */
final class TestCluster implements AutoCloseable {
    final Path dir;
    final List<String> clients = new ArrayList<>();
    private final List<String> peers = new ArrayList<>();
    private final String initial;
    private final Map<Integer, Process> procs = new TreeMap<>();
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofMillis(500)).build();

    private static TestCluster shared;

    /** One cluster for every test class that does not kill nodes: started once per run. */
    static synchronized TestCluster shared() {
        if (shared == null) {
            shared = start();
            TestCluster c = shared;
            Runtime.getRuntime().addShutdownHook(new Thread(c::close));
        }
        return shared;
    }

    static String binary() {
        String p = System.getenv("RAFTLOCKD");
        if (p != null && !p.isEmpty()) {
            return p;
        }
        // clients/java -> the workspace root.
        File f = new File("../../target/debug/raftlockd").getAbsoluteFile();
        if (!f.exists()) {
            throw new IllegalStateException(f + " not found: build it with `cargo build --bins`, or set RAFTLOCKD");
        }
        return f.getPath();
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private final List<String> flags;

    private TestCluster(Path dir, List<String> flags) {
        this.dir = dir;
        this.flags = flags;
        List<String> parts = new ArrayList<>();
        for (int i = 1; i <= 3; i++) {
            String client = "127.0.0.1:" + freePort();
            String peer = "127.0.0.1:" + freePort();
            clients.add(client);
            peers.add(peer);
            parts.add(i + "=" + peer + "/" + client);
        }
        this.initial = String.join(",", parts);
    }

    /** Starts a 3-node cluster and waits for a leader. */
    static TestCluster start() {
        return start(List.of());
    }

    /** A cluster whose nodes all get flags besides the fixture's own. */
    static TestCluster start(List<String> flags) {
        Path dir;
        try {
            dir = Files.createTempDirectory("raftlock-java-");
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        TestCluster c = new TestCluster(dir, List.copyOf(flags));
        for (int i = 1; i <= 3; i++) {
            c.startNode(i);
        }
        c.waitLeader(Duration.ofSeconds(30), 0);
        return c;
    }

    String endpoints() {
        return String.join(",", clients);
    }

    RaftlockClient client() {
        return RaftlockClient.builder().endpoints(endpoints()).build();
    }

    void startNode(int i) {
        File log = dir.resolve("n" + i + ".log").toFile();
        List<String> cmd = new ArrayList<>(List.of(binary(), "--id", Integer.toString(i),
                "--data-dir", dir.resolve("n" + i).toString(),
                "--listen-client", clients.get(i - 1), "--listen-peer", peers.get(i - 1),
                "--initial-cluster", initial));
        cmd.addAll(flags);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log));
        try {
            Process p = pb.start();
            synchronized (procs) {
                procs.put(i, p);
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** SIGKILLs node i (by the PID this fixture started) and waits until it is gone. */
    void kill(int i) {
        Process p;
        synchronized (procs) {
            p = procs.remove(i);
        }
        if (p == null) {
            return;
        }
        p.destroyForcibly();
        try {
            p.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Sends sig (STOP, CONT) to node i, by the PID this fixture started. */
    void signal(int i, String sig) {
        Process p;
        synchronized (procs) {
            p = procs.get(i);
        }
        try {
            Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start();
            if (k.waitFor() != 0) {
                throw new IllegalStateException("kill -" + sig + " " + p.pid() + " failed");
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The node that says it leads, or 0. */
    int leader() {
        List<Integer> ids;
        synchronized (procs) {
            ids = new ArrayList<>(procs.keySet());
        }
        for (int i : ids) {
            try {
                HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + clients.get(i - 1) + "/v1/cluster/status"))
                        .timeout(Duration.ofMillis(500)).header("content-type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{}")).build();
                HttpResponse<String> res = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
                if (res.statusCode() != 200) {
                    continue;
                }
                JsonNode s = Wire.JSON.readTree(res.body());
                if ("ROLE_LEADER".equals(Wire.text(s, "role")) && Wire.u64(s, "nodeId") == Wire.u64(s, "leaderId")) {
                    return i;
                }
            } catch (IOException e) {
                // Not up yet, or gone.
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return 0;
            }
        }
        return 0;
    }

    /** Waits for a leader other than otherThan (0: any). */
    int waitLeader(Duration within, int otherThan) {
        long end = System.nanoTime() + within.toNanos();
        while (System.nanoTime() < end) {
            int n = leader();
            if (n != 0 && n != otherThan) {
                return n;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        throw new IllegalStateException("no leader within " + within + "; logs:\n" + logs());
    }

    String logs() {
        StringBuilder b = new StringBuilder();
        for (int i = 1; i <= 3; i++) {
            try {
                List<String> lines = Files.readAllLines(dir.resolve("n" + i + ".log"));
                b.append("--- n").append(i).append('\n');
                // A panic's message comes before its backtrace, which fills the tail.
                lines.stream().filter(l -> l.contains("panicked")).limit(3).forEach(l -> b.append(l).append('\n'));
                lines.subList(Math.max(0, lines.size() - 30), lines.size()).forEach(l -> b.append(l).append('\n'));
            } catch (IOException e) {
                b.append("--- n").append(i).append(": ").append(e).append('\n');
            }
        }
        return b.toString();
    }

    /** Kills every node this cluster started and removes its directory. */
    @Override
    public void close() {
        List<Integer> ids;
        synchronized (procs) {
            ids = new ArrayList<>(procs.keySet());
        }
        for (int i : ids) {
            // A frozen node is killed all the same; resumed first so that it goes at once.
            signal(i, "CONT");
        }
        synchronized (procs) {
            ids = new ArrayList<>(procs.keySet());
        }
        for (int i : ids) {
            kill(i);
        }
        try (Stream<Path> w = Files.walk(dir)) {
            w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            // A temp dir left behind harms nothing.
        }
    }
}
