package io.github.raftlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * TLS with a private CA and bearer tokens, against {@code raftlockd dev --tls --auth} (a
 * process this test starts and stops by its PID; it stops its own nodes), as Go's
 * TestTLSWithAPrivateCAATokenOrAClientCertificate.
 */
class TlsAuthTest {
    static Process dev;
    static final Map<String, String> vars = new HashMap<>();

    @BeforeAll
    static void startDev() throws Exception {
        ProcessBuilder pb = new ProcessBuilder(TestCluster.binary(), "dev", "--tls", "--auth");
        pb.redirectError(ProcessBuilder.Redirect.DISCARD);
        dev = pb.start();
        CompletableFuture<Void> up = new CompletableFuture<>();
        // Read to the end, not only up to "nodes up": a pipe closed under it makes `dev`
        // fail its next write and exit, taking the cluster (and its CA file) with it.
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(dev.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    int eq = line.indexOf('=');
                    if (!up.isDone() && line.startsWith("RAFTLOCK_") && eq > 0 && !line.substring(0, eq).contains(" ")) {
                        vars.put(line.substring(0, eq), line.substring(eq + 1));
                    }
                    if (line.contains("nodes up")) {
                        up.complete(null);
                    }
                }
                up.completeExceptionally(new IllegalStateException("raftlockd dev exited"));
            } catch (java.io.IOException e) {
                up.completeExceptionally(e);
            }
        }, "dev-output");
        reader.setDaemon(true);
        reader.start();
        up.get(60, TimeUnit.SECONDS);
    }

    @AfterAll
    static void stopDev() throws Exception {
        dev.destroy();
        if (!dev.waitFor(15, TimeUnit.SECONDS)) {
            dev.destroyForcibly();
        }
    }

    @Test
    void tlsWithAPrivateCaAndABearerToken() throws Exception {
        String eps = vars.get("RAFTLOCK_ENDPOINTS");
        String ca = vars.get("RAFTLOCK_CACERT");
        String token = vars.get("RAFTLOCK_AUTH_TOKEN");
        assertTrue(eps != null && ca != null && token != null, "raftlockd dev printed " + vars);

        Map<String, String> env = Map.of("RAFTLOCK_ENDPOINTS", "https://" + eps.replace(",", ",https://"),
                "RAFTLOCK_CACERT", ca, "RAFTLOCK_AUTH_TOKEN", token);
        try (RaftlockClient c = RaftlockClient.builderFromEnv(env).build(); Session s = c.newSession(Duration.ofSeconds(5))) {
            assertFalse(c.status().leaderAddr().isEmpty());
            DistributedLock l = s.lock("team-a/job");
            l.lock();
            assertTrue(c.validate("team-a/job", l.token()).valid(), "validate over TLS");
            l.unlock();
        }
        // Endpoints without a scheme and the CA alone turn TLS on too.
        try (RaftlockClient c = RaftlockClient.builder().endpoints(eps).caCert(java.nio.file.Path.of(ca)).authToken(token).build()) {
            assertTrue(c.status().nodeId() > 0);
        }
        try (RaftlockClient anon = RaftlockClient.builder().endpoints(eps).caCert(java.nio.file.Path.of(ca))
                .requestTimeout(Duration.ofSeconds(3)).build()) {
            UnauthenticatedException e = assertThrows(UnauthenticatedException.class, anon::status);
            assertEquals(Reason.UNAUTHENTICATED, e.reason());
        }
        try (RaftlockClient wrong = RaftlockClient.builder().endpoints(eps).caCert(java.nio.file.Path.of(ca))
                .authToken("not-a-token").requestTimeout(Duration.ofSeconds(3)).build()) {
            RaftlockException e = assertThrows(RaftlockException.class, () -> wrong.newSession(Duration.ofSeconds(5)));
            assertTrue(e instanceof UnauthenticatedException, "a wrong token: " + e + ", after " + e.getCause());
        }
        try (RaftlockClient plain = RaftlockClient.builder().endpoints(eps).authToken(token)
                .requestTimeout(Duration.ofSeconds(1)).build()) {
            assertThrows(UnavailableException.class, plain::status, "plain HTTP to a TLS port fails");
        }
    }
}
