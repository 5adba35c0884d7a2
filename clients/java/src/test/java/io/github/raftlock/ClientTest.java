package io.github.raftlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Configuration, endpoints, the reason table and its mapping to exception classes. */
class ClientTest {
    @Test
    void fromEnvReadsTheCliVariables() throws Exception {
        RaftlockClient.Builder b = RaftlockClient.builderFromEnv(Map.of(
                "RAFTLOCK_ENDPOINTS", "http://10.0.0.1:7000/, 10.0.0.2:7001,https://h3:7002",
                "RAFTLOCK_AUTH_TOKEN", "s3cret"));
        assertEquals(List.of("10.0.0.1:7000", "10.0.0.2:7001", "h3:7002"), b.parsedEndpoints());
        assertTrue(b.wantsTls(), "an https:// endpoint turns TLS on");
        assertEquals("s3cret", b.token());
        assertEquals(List.of("127.0.0.1:7000"), RaftlockClient.builderFromEnv(Map.of()).parsedEndpoints(), "the CLI's default");
        assertFalse(RaftlockClient.builderFromEnv(Map.of()).wantsTls());
        assertEquals(Path.of("/etc/ca.pem"), RaftlockClient.builderFromEnv(Map.of("RAFTLOCK_CACERT", "/etc/ca.pem")).caCert());
    }

    @Test
    void badConfigurationIsRefusedAsInvalidArgument() throws Exception {
        assertThrows(InvalidArgumentException.class, () -> RaftlockClient.builder().build());
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> RaftlockClient.builder().endpoints("no-port").build());
        assertEquals(Reason.INVALID_ARGUMENT, e.reason());
        assertThrows(InvalidArgumentException.class, () -> RaftlockClient.builder().endpoints("h:1").authToken("has space").build());
        Path notPem = Files.createTempFile("raftlock", ".pem");
        try {
            Files.writeString(notPem, "not a certificate");
            assertThrows(InvalidArgumentException.class, () -> RaftlockClient.builder().endpoints("h:1").caCert(notPem).build());
        } finally {
            Files.delete(notPem);
        }
    }

    @Test
    void endpointsWithOrWithoutSchemeReachTheCluster() throws Exception {
        TestCluster c = TestCluster.shared();
        try (RaftlockClient plain = RaftlockClient.builder().endpoints(c.clients.get(0)).build();
             RaftlockClient schemed = RaftlockClient.builder().endpoints("http://" + c.clients.get(1) + "/").build()) {
            ClusterStatus a = plain.status();
            ClusterStatus b = schemed.status();
            assertFalse(a.leaderAddr().isEmpty());
            assertEquals(a.leaderAddr(), b.leaderAddr());
            try (Session s = schemed.newSession()) {
                assertTrue(s.lock("scheme/a").tryLock());
            }
        }
        try (RaftlockClient fromEnv = RaftlockClient.builderFromEnv(Map.of("RAFTLOCK_ENDPOINTS", c.endpoints())).build()) {
            assertTrue(fromEnv.status().nodeId() > 0);
        }
    }

    @Test
    void aClosedClientRefusesCalls() throws Exception {
        RaftlockClient c = TestCluster.shared().client();
        Session s = c.newSession();
        c.close();
        assertTrue(s.lost().isDone(), "closing the client closes its sessions");
        assertThrows(ClientClosedException.class, c::status);
        assertThrows(ClientClosedException.class, c::newSession);
    }

    /** Exactly-once numbering, acknowledged call by call (Go's TestTicketsAcknowledgeCallByCall). */
    @Test
    void ticketsAcknowledgeCallByCall() throws Exception {
        try (RaftlockClient c = TestCluster.shared().client(); Session s = c.newSession()) {
            Session.Ticket a = s.ticket();
            Session.Ticket b = s.ticket();
            com.fasterxml.jackson.databind.node.ObjectNode body = b.fields(Wire.obj());
            assertEquals(Long.toString(b.seq), body.get("seq").asText());
            assertEquals(Long.toString(a.seq), body.get("ackedBelow").asText(), "a's answer is still awaited");
            assertEquals(2, body.get("inFlight").size());
            a.close();
            body = b.fields(Wire.obj());
            assertEquals(Long.toString(b.seq), body.get("ackedBelow").asText(), "a's answer is acknowledged");
            assertEquals(1, body.get("inFlight").size());
            Session.Ticket later = s.ticket();
            b.close();
            assertEquals(Long.toString(later.seq), later.fields(Wire.obj()).get("ackedBelow").asText(),
                    "a long wait does not hold back later calls once answered");
            later.close();
        }
    }

    @Test
    void everyReasonRoundTripsAndMapsToItsOwnClass() {
        for (Reason r : Reason.values()) {
            assertSame(r, Reason.fromWire(r.wire()));
            RaftlockException e = Errors.of(new ErrorInfo(r.wire(), "X", "m"));
            assertEquals(r, e.reason());
            if (r != Reason.UNKNOWN) {
                String expected = java.util.Arrays.stream(r.name().split("_"))
                        .map(p -> p.charAt(0) + p.substring(1).toLowerCase()).reduce("", String::concat) + "Exception";
                assertEquals(expected, e.getClass().getSimpleName(), "one class per reason");
            }
        }
        assertSame(Reason.UNKNOWN, Reason.fromWire("A_REASON_FROM_THE_FUTURE"));
        assertSame(Reason.UNKNOWN, Reason.fromWire(""));
        assertSame(Reason.UNKNOWN, Reason.fromWire(null));
        RaftlockException future = Errors.of(new ErrorInfo("A_REASON_FROM_THE_FUTURE", "X", "m"));
        assertEquals(RaftlockException.class, future.getClass());
        assertEquals("A_REASON_FROM_THE_FUTURE", future.wireReason());
        assertEquals(31, EnumSet.complementOf(EnumSet.of(Reason.UNKNOWN)).size());
    }

    @Test
    void groupsOfReasonsShareASuperclass() {
        for (Reason r : List.of(Reason.NOT_LEADER, Reason.NO_QUORUM, Reason.STOPPING)) {
            RaftlockException e = Errors.of(new ErrorInfo(r.wire(), "UNAVAILABLE", "m"));
            assertTrue(e instanceof UnavailableException);
            assertTrue(e.retryable());
        }
        for (Reason r : List.of(Reason.REQUEST_RELEASED, Reason.REQUEST_FINISHED, Reason.REQUEST_ACKNOWLEDGED)) {
            assertTrue(Errors.of(new ErrorInfo(r.wire(), "FAILED_PRECONDITION", "m")) instanceof RequestSettledException);
        }
        assertTrue(Errors.of(new ErrorInfo("SESSION_NOT_FOUND", "NOT_FOUND", "m")) instanceof SessionLostException);
        assertTrue(Errors.local(Errors.KIND_HOLD_EXPIRED, "X", "m") instanceof SessionLostException);
        // Never by message: a body without a reason is typed by its code alone.
        RaftlockException proxy = Errors.fromBody(null, 502, "");
        assertTrue(proxy instanceof UnavailableException);
        assertEquals(Reason.UNKNOWN, proxy.reason());
        assertTrue(Errors.fromBody(null, 401, "") instanceof UnauthenticatedException);
        RaftlockException hinted = Errors.fromBody(null, 503, "127.0.0.1:9");
        assertEquals("127.0.0.1:9", hinted.leader());
    }

    @Test
    void aLeaderHintThatIsNotAnAddressIsIgnored() {
        for (String ok : List.of("127.0.0.1:7000", "[::1]:7000", "node-1.example:443")) {
            assertTrue(Transport.isAddress(ok), ok);
        }
        for (String bad : List.of("", "host", "host:", ":80", "host:0", "host:65536", "h:x", "bad host^:1")) {
            assertFalse(Transport.isAddress(bad), bad);
        }
        try (RaftlockClient c = RaftlockClient.builder().endpoints("127.0.0.1:7000").build()) {
            c.transport().hint("bad host^:1");
            c.transport().hint("http://10.0.0.9:7000/");
            assertEquals(List.of("127.0.0.1:7000", "10.0.0.9:7000"), c.transport().endpoints());
        }
    }
}
