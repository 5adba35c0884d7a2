package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * The proto3 JSON mapping the HTTP API speaks: 64-bit integers as decimal strings (a
 * lenient node may send numbers), bytes as base64, absent fields as zero.
 */
final class Wire {
    static final ObjectMapper JSON = new ObjectMapper();
    private static final SecureRandom RANDOM = new SecureRandom();

    private Wire() {}

    static ObjectNode obj() {
        return JSON.createObjectNode();
    }

    /** A u64 field: a string or a number; absent means zero. */
    static long u64(JsonNode n, String field) {
        JsonNode v = n == null ? null : n.get(field);
        if (v == null || v.isNull()) {
            return 0;
        }
        if (v.isNumber()) {
            return v.asLong();
        }
        String s = v.asText();
        return s.isEmpty() ? 0 : Long.parseUnsignedLong(s);
    }

    static String str(long v) {
        return Long.toUnsignedString(v);
    }

    static String ms(Duration d) {
        long m = d.toMillis();
        return Long.toString(Math.max(0, m));
    }

    static String b64(byte[] b) {
        return Base64.getEncoder().encodeToString(b);
    }

    static byte[] bytes(JsonNode n, String field) {
        JsonNode v = n == null ? null : n.get(field);
        if (v == null || v.isNull() || v.asText().isEmpty()) {
            return new byte[0];
        }
        return Base64.getDecoder().decode(v.asText());
    }

    static String text(JsonNode n, String field) {
        JsonNode v = n == null ? null : n.get(field);
        return v == null || v.isNull() ? "" : v.asText();
    }

    static boolean bool(JsonNode n, String field) {
        JsonNode v = n == null ? null : n.get(field);
        return v != null && v.asBoolean();
    }

    /** The grant in field, or null when absent. */
    static Grant grant(JsonNode n, String field) {
        JsonNode g = n == null ? null : n.get(field);
        return g == null || g.isNull() ? null : Grant.fromJson(g);
    }

    static List<Grant> grants(JsonNode n, String field) {
        List<Grant> out = new ArrayList<>();
        JsonNode a = n == null ? null : n.get(field);
        if (a != null && a.isArray()) {
            for (JsonNode g : a) {
                out.add(Grant.fromJson(g));
            }
        }
        return out;
    }

    /**
     * A UUID v7 (48 bits of Unix ms, then random bits), so that ids sort by creation time
     * in server logs.
     */
    static byte[] newRequestId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        byte[] t = ByteBuffer.allocate(8).putLong(System.currentTimeMillis()).array();
        System.arraycopy(t, 2, b, 0, 6);
        b[6] = (byte) (0x70 | (b[6] & 0x0f));
        b[8] = (byte) (0x80 | (b[8] & 0x3f));
        return b;
    }
}
