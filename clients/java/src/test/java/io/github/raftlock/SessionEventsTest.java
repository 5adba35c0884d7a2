package io.github.raftlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** How a session reports its state and its end. */
class SessionEventsTest {
    /**
     * RECONNECTED decided just before the session ends must not be delivered after LOST.
     * The renewal's emit is held open (its snapshot of the listeners blocks) while the
     * session ends on another thread.
     */
    @Test
    void noStateEventAfterLost() throws Exception {
        RaftlockClient c = TestCluster.shared().client();
        BlockingQueue<SessionState> states = new LinkedBlockingQueue<>();
        try (Session s = c.newSession(Duration.ofSeconds(3), (x, st) -> states.add(st))) {
            assertEquals(SessionState.CONNECTED, states.poll(3, TimeUnit.SECONDS));
            CountDownLatch inEmit = new CountDownLatch(1);
            CountDownLatch ending = new CountDownLatch(1);
            Thread me = Thread.currentThread();
            CopyOnWriteArrayList<SessionStateListener> held = new CopyOnWriteArrayList<>() {
                volatile boolean armed = true;

                @Override
                public Object[] toArray() {
                    if (armed && Thread.currentThread() != me) {
                        armed = false;
                        inEmit.countDown();
                        try {
                            ending.await(2, TimeUnit.SECONDS);
                            Thread.sleep(300);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                    return super.toArray();
                }
            };
            c.transport().partitioned = true;
            assertEquals(SessionState.SUSPENDED, states.poll(3, TimeUnit.SECONDS));
            Field f = Session.class.getDeclaredField("listeners");
            f.setAccessible(true);
            @SuppressWarnings("unchecked")
            List<SessionStateListener> old = (List<SessionStateListener>) f.get(s);
            held.addAll(old);
            f.set(s, held);
            c.transport().partitioned = false;
            assertTrue(inEmit.await(3, TimeUnit.SECONDS), "the renewal reconnects");
            ending.countDown();
            Method end = Session.class.getDeclaredMethod("end", RaftlockException.class, boolean.class);
            end.setAccessible(true);
            end.invoke(s, Errors.local(Errors.KIND_SESSION_LOST, "FAILED_PRECONDITION", "test: lost"), true);
            Thread.sleep(1000);
            List<SessionState> after = new java.util.ArrayList<>();
            states.drainTo(after);
            assertTrue(!after.isEmpty() && after.get(after.size() - 1) == SessionState.LOST, "LOST comes last: " + after);
        } finally {
            c.transport().partitioned = false;
            c.close();
        }
    }

    @Test
    void aMalformedLeaderHintDoesNotStopTheKeepAlives() throws Exception {
        RaftlockClient c = TestCluster.shared().client();
        try (Session s = c.newSession(Duration.ofSeconds(2))) {
            // What a bad raftlock-leader header leaves behind: an address no URI accepts.
            c.transport().follow("bad host^:1");
            Thread.sleep(3000);
            assertTrue(s.isValid(), "still renewed: " + s.error());
        } finally {
            c.close();
        }
    }

    /**
     * A slow callback on lost() must not hold up the interrupt of the work that relied on
     * the session: that interrupt is what stops it before the lock goes to another.
     */
    @Test
    void aSlowLostCallbackDoesNotDelayRunWhileHeldsInterrupt() throws Exception {
        RaftlockClient c = TestCluster.shared().client();
        try (Session s = c.newSession(Duration.ofSeconds(2))) {
            LockGuard g = s.lock("events/slow-callback").acquire(Duration.ofSeconds(5));
            AtomicLong callbackAt = new AtomicLong();
            s.lost().thenAccept(why -> {
                callbackAt.set(System.nanoTime());
                try {
                    Thread.sleep(3000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            CompletableFuture<Long> interruptedAt = CompletableFuture.supplyAsync(() -> {
                try {
                    g.runWhileHeld(() -> {
                        Thread.sleep(20_000);
                        return null;
                    });
                } catch (Exception e) {
                    // The loss, thrown once the body stopped.
                }
                return System.nanoTime();
            });
            Thread.sleep(200);
            c.transport().partitioned = true;
            long at = interruptedAt.get(10, TimeUnit.SECONDS);
            long deadline = s.validUntilNanos();
            assertTrue(at - deadline < TimeUnit.MILLISECONDS.toNanos(1000),
                    "interrupted " + (at - deadline) / 1_000_000 + " ms after the deadline");
            if (callbackAt.get() != 0) {
                assertTrue(at - callbackAt.get() < TimeUnit.MILLISECONDS.toNanos(1000), "not after the slow callback");
            }
            c.transport().partitioned = false;
        } finally {
            c.transport().partitioned = false;
            c.close();
        }
    }
}
