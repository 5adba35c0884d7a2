package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static io.github.raftlock.Util.holders;
import static io.github.raftlock.Util.waiters;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class LockTest extends OnSharedCluster {
    @Test
    void lockUnlockTokensIncreaseAndValidate() throws Exception {
        try (Session a = client.newSession(); Session b = client.newSession()) {
            DistributedLock la = a.lock("basic/a");
            DistributedLock lb = b.lock("basic/a");
            la.lock();
            long t1 = la.token();
            assertTrue(t1 > 0);
            assertTrue(la.isHeld());
            assertTrue(client.validate("basic/a", t1).valid());
            assertFalse(lb.tryLock(), "busy for another session");
            assertFalse(lb.tryLock(200, TimeUnit.MILLISECONDS), "a bounded wait runs out");
            assertEquals(List.of(), waiters(client, "basic/a"), "a timed-out wait leaves the queue");
            la.unlock();
            assertFalse(client.validate("basic/a", t1).valid());
            assertThrows(NotHolderException.class, la::unlock);
            try (LockGuard g = lb.acquire(Duration.ofSeconds(5))) {
                assertTrue(g.token() > t1, "tokens strictly increase in grant order");
                assertTrue(g.validate());
                assertEquals(LockMode.EXCLUSIVE, g.grant().mode());
                assertEquals(b.id(), g.grant().sessionId());
            }
            assertThrows(UnsupportedOperationException.class, la::newCondition);
        }
    }

    @Test
    void reentryFromTheHoldingThreadIsRefusedNotDeadlocked() throws Exception {
        try (Session a = client.newSession()) {
            DistributedLock l = a.lock("basic/reentry");
            l.lock();
            assertThrows(AlreadyHeldException.class, l::lock);
            l.unlock();
        }
    }

    @Test
    void threadsSharingAHandleQueueLocally() throws Exception {
        try (Session a = client.newSession()) {
            DistributedLock l = a.lock("basic/shared-handle");
            l.lock();
            CompletableFuture<Long> other = CompletableFuture.supplyAsync(() -> {
                l.lock();
                long t = l.token();
                l.unlock();
                return t;
            });
            Thread.sleep(200);
            assertFalse(other.isDone(), "the second thread waits for the handle's hold");
            long first = l.token();
            l.unlock();
            assertTrue(other.get(10, TimeUnit.SECONDS) > first);
        }
    }

    /** B waits on a lock A holds, C queues behind B; interrupting B hands the lock to C at once. */
    @Test
    void interruptGivesUpTheWaitOnTheServer() throws Exception {
        String name = "cancel/interrupt";
        try (Session sa = client.newSession(); Session sb = client.newSession(); Session sc = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            AtomicReference<Throwable> bGot = new AtomicReference<>();
            Thread b = new Thread(() -> {
                try {
                    sb.lock(name).lockInterruptibly();
                    bGot.set(new AssertionError("b was granted"));
                } catch (Throwable t) {
                    bGot.set(t);
                }
            });
            b.start();
            eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            DistributedLock c = sc.lock(name);
            CompletableFuture<Long> cGot = CompletableFuture.supplyAsync(() -> {
                c.lock();
                return System.nanoTime();
            });
            eventually("c queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 2);

            b.interrupt();
            b.join(2000);
            assertFalse(b.isAlive(), "an interrupted lockInterruptibly returns");
            assertTrue(bGot.get() instanceof InterruptedException, "b: " + bGot.get());
            eventually("b gone from the queue", Duration.ofSeconds(2),
                    () -> waiters(client, name).equals(List.of(sc.id())));
            long released = System.nanoTime();
            a.unlock();
            long grantedAt = cGot.get(10, TimeUnit.SECONDS);
            assertTrue(grantedAt - released < TimeUnit.SECONDS.toNanos(2), "c granted at once, not after b's timeout");
            LockInfo info = client.describe(name);
            assertEquals(List.of(sc.id()), holders(client, name));
            assertEquals(0, info.waiters().size());
            c.unlock();
        }
    }

    @Test
    void uninterruptibleLockKeepsWaitingAndReassertsTheInterrupt() throws Exception {
        String name = "cancel/uninterruptible";
        try (Session sa = client.newSession(); Session sb = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            DistributedLock bl = sb.lock(name);
            AtomicBoolean flagAfter = new AtomicBoolean();
            AtomicReference<Throwable> err = new AtomicReference<>();
            Thread b = new Thread(() -> {
                try {
                    bl.lock();
                    flagAfter.set(Thread.currentThread().isInterrupted());
                } catch (Throwable t) {
                    err.set(t);
                }
            });
            b.start();
            eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            b.interrupt();
            Thread.sleep(700);
            assertTrue(b.isAlive(), "lock() ignores the interrupt");
            assertEquals(List.of(sb.id()), waiters(client, name), "b still queued, once");
            a.unlock();
            b.join(10000);
            assertEquals(null, err.get());
            assertTrue(bl.isHeld());
            assertTrue(flagAfter.get(), "the interrupt flag is set again");
            bl.unlock();
        }
    }

    @Test
    void cancellingAnAsyncAcquireGivesUpTheWait() throws Exception {
        String name = "cancel/async";
        try (Session sa = client.newSession(); Session sb = client.newSession(); Session sc = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            CompletableFuture<LockGuard> fb = sb.lock(name).acquireAsync(Duration.ofSeconds(30));
            eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            CompletableFuture<LockGuard> fc = sc.lock(name).acquireAsync(Duration.ofSeconds(30));
            eventually("c queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 2);
            assertTrue(fb.cancel(true));
            assertThrows(CancellationException.class, fb::join);
            eventually("b gone from the queue", Duration.ofSeconds(2), () -> waiters(client, name).equals(List.of(sc.id())));
            a.unlock();
            try (LockGuard g = fc.get(5, TimeUnit.SECONDS)) {
                assertEquals(sc.id(), g.grant().sessionId());
            }
        }
    }

    @Test
    void leaseTimeCapsTheHold() throws Exception {
        String name = "cap/lease";
        try (Session sa = client.newSession(); Session sb = client.newSession()) {
            DistributedLock a = sa.lock(name);
            long start = System.nanoTime();
            assertTrue(a.tryLock(1, 1, TimeUnit.SECONDS));
            LockGuard g = a.guard().orElseThrow();
            assertEquals(Duration.ofSeconds(1), g.grant().maxHold());
            RaftlockException why = g.lost().get(5, TimeUnit.SECONDS);
            long lostAt = System.nanoTime();
            assertTrue(why instanceof HoldExpiredException, "lost: " + why);
            assertTrue(lostAt - start < TimeUnit.MILLISECONDS.toNanos(1000), "reported before the cap");
            assertFalse(g.isValid());
            // The leader released it at the cap: another session gets it.
            try (LockGuard gb = sb.lock(name).acquire(Duration.ofSeconds(5))) {
                assertTrue(gb.token() > g.token());
            }
            a.unlock();
        }
    }

    @Test
    void invalidNamesAndTtlsRaiseTheirTypedExceptions() throws Exception {
        try (Session s = client.newSession()) {
            InvalidNameException e = assertThrows(InvalidNameException.class, () -> s.lock("").tryLock());
            assertEquals(Reason.INVALID_NAME, e.reason());
            assertEquals("INVALID_ARGUMENT", e.code());
            assertThrows(InvalidNameException.class, () -> s.lock("x".repeat(600)).acquire(Duration.ofSeconds(1)));
            DistributedLock l = s.lock("typed/stale");
            l.lock();
            long t = l.token();
            StaleTokenException st = assertThrows(StaleTokenException.class, () -> s.release("typed/stale", t + 1));
            assertEquals(Reason.STALE_TOKEN, st.reason());
            l.unlock();
            assertThrows(NotHolderException.class, () -> s.release("typed/stale", t));
        }
        TtlOutOfRangeException e = assertThrows(TtlOutOfRangeException.class, () -> client.newSession(Duration.ofDays(30)));
        assertEquals(Reason.TTL_OUT_OF_RANGE, e.reason());
        assertFalse(e.retryable());
    }

    @Test
    void aClosedSessionReleasesItsLocksAndReportsLoss() throws Exception {
        Session s = client.newSession();
        DistributedLock l = s.lock("close/a");
        LockGuard g = l.acquire();
        s.close();
        assertTrue(g.lost().get(2, TimeUnit.SECONDS) instanceof SessionLostException);
        assertEquals(List.of(), holders(client, "close/a"));
        assertFalse(g.isValid());
        g.close();
        assertThrows(SessionLostException.class, () -> l.tryLock());
    }

    /**
     * The closest honest equivalent of Go's TestPausedHolderSeesLostBeforeTheNextGrant:
     * the holder's client is cut off from the cluster (its keep-alives stop being
     * acknowledged) while its body runs in runWhileHeld. The body must be interrupted
     * before the server grants the lock to another session, and the holder must not have
     * counted on the lock past that grant.
     */
    @Test
    void lostScopeInterruptsTheBodyBeforeTheNextGrant() throws Exception {
        String name = "pause/a";
        RaftlockClient holderClient = TestCluster.shared().client();
        try (Session holder = holderClient.newSession(Duration.ofSeconds(2)); Session other = client.newSession()) {
            LockGuard g = holder.lock(name).acquire();
            AtomicLong interruptedAt = new AtomicLong();
            AtomicLong lastValidDeadline = new AtomicLong();
            BlockingQueue<Object> result = new ArrayBlockingQueue<>(1);
            Thread body = new Thread(() -> {
                try {
                    g.runWhileHeld(() -> {
                        while (true) {
                            long now = System.nanoTime();
                            if (g.isValid()) {
                                lastValidDeadline.set(g.validUntilNanos());
                            }
                            try {
                                Thread.sleep(10);
                            } catch (InterruptedException e) {
                                interruptedAt.set(System.nanoTime());
                                throw e;
                            }
                            if (now == 0) {
                                return null;
                            }
                        }
                    });
                    result.add("returned");
                } catch (Exception e) {
                    result.add(e);
                }
            });
            body.start();
            Thread.sleep(300);
            long cutAt = System.nanoTime();
            holderClient.transport().partitioned = true;
            try (LockGuard next = other.lock(name).acquire(Duration.ofSeconds(20))) {
                long grantedAt = System.nanoTime();
                Object r = result.poll(5, TimeUnit.SECONDS);
                assertNotNull(r, "the body was not stopped");
                assertTrue(r instanceof SessionLostException, "body ended with " + r);
                assertTrue(interruptedAt.get() != 0, "the body saw an interrupt");
                assertTrue(interruptedAt.get() < grantedAt, "interrupted "
                        + TimeUnit.NANOSECONDS.toMillis(grantedAt - interruptedAt.get()) + " ms before the next grant, not after");
                assertTrue(lastValidDeadline.get() != 0 && lastValidDeadline.get() <= grantedAt,
                        "the holder counted on the lock until after the next grant");
                assertTrue(grantedAt - cutAt > TimeUnit.MILLISECONDS.toNanos(1000),
                        "granted within the cut-off holder's TTL");
                assertTrue(next.token() > g.token());
                assertFalse(g.isValid());
            }
            // Reconnected before the session's close, which would otherwise retry its
            // request timeout away.
            holderClient.transport().partitioned = false;
        } finally {
            holderClient.transport().partitioned = false;
            holderClient.close();
        }
    }

    @Test
    void sessionStatesSuspendedReconnectedLost() throws Exception {
        RaftlockClient c = TestCluster.shared().client();
        BlockingQueue<SessionState> states = new ArrayBlockingQueue<>(16);
        try (Session s = c.newSession(Duration.ofSeconds(3), (x, st) -> states.add(st))) {
            assertEquals(SessionState.CONNECTED, states.poll(3, TimeUnit.SECONDS));
            c.transport().partitioned = true;
            assertEquals(SessionState.SUSPENDED, states.poll(3, TimeUnit.SECONDS));
            c.transport().partitioned = false;
            assertEquals(SessionState.RECONNECTED, states.poll(3, TimeUnit.SECONDS));
            assertTrue(s.isValid());
            c.transport().partitioned = true;
            assertEquals(SessionState.SUSPENDED, states.poll(3, TimeUnit.SECONDS));
            assertEquals(SessionState.LOST, states.poll(5, TimeUnit.SECONDS));
            assertFalse(s.isValid());
            assertTrue(s.lost().isDone());
            c.transport().partitioned = false;
        } finally {
            c.transport().partitioned = false;
            c.close();
        }
    }

    @Test
    void waitersAreGrantedInFifoOrderWithIncreasingTokens() throws Exception {
        String name = "fifo/a";
        try (Session sh = client.newSession(); Session s1 = client.newSession(); Session s2 = client.newSession();
             Session s3 = client.newSession()) {
            DistributedLock holder = sh.lock(name);
            holder.lock();
            List<Session> order = List.of(s1, s2, s3);
            BlockingQueue<Object[]> granted = new ArrayBlockingQueue<>(3);
            for (int i = 0; i < 3; i++) {
                Session s = order.get(i);
                int idx = i;
                CompletableFuture.runAsync(() -> {
                    try {
                        LockGuard g = s.lock(name).acquire(Duration.ofSeconds(30));
                        granted.add(new Object[] {idx, g});
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                // Queue them one after the other.
                eventually("waiter queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == idx + 1);
            }
            assertEquals(List.of(s1.id(), s2.id(), s3.id()), waiters(client, name));
            long last = holder.token();
            holder.unlock();
            for (int want = 0; want < 3; want++) {
                Object[] r = granted.poll(10, TimeUnit.SECONDS);
                assertNotNull(r, "waiter " + want + " not granted");
                assertEquals(want, r[0], "granted out of FIFO order");
                LockGuard g = (LockGuard) r[1];
                assertTrue(g.token() > last);
                last = g.token();
                g.close();
            }
        }
    }

    /**
     * The holder releases at the moment the waiter gives up: whichever wins, the lock must
     * not stay with the waiter that left, and its session can lock again at once (Go's
     * TestGrantRacingACancelIsGivenBack).
     */
    @Test
    void aGrantRacingAnInterruptIsGivenBack() throws Exception {
        try (Session sa = client.newSession(); Session sb = client.newSession()) {
            java.util.Random rng = new java.util.Random();
            int won = 0;
            int left = 0;
            for (int i = 0; i < 10; i++) {
                String name = "race/" + i;
                DistributedLock holder = sa.lock(name);
                DistributedLock waiter = sb.lock(name);
                holder.lock();
                BlockingQueue<Object> got = new ArrayBlockingQueue<>(1);
                Thread w = new Thread(() -> {
                    try {
                        waiter.lockInterruptibly();
                        got.add("granted");
                    } catch (Exception e) {
                        got.add(e);
                    }
                });
                w.start();
                eventually("waiter queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
                int skew = rng.nextInt(6000);
                CompletableFuture<Void> unlocked = CompletableFuture.runAsync(() -> {
                    java.util.concurrent.locks.LockSupport.parkNanos(skew * 1000L);
                    holder.unlock();
                });
                Thread.sleep(3);
                w.interrupt();
                unlocked.get(10, TimeUnit.SECONDS);
                Object r = got.poll(5, TimeUnit.SECONDS);
                assertNotNull(r, "round " + i + ": an interrupted lock did not return");
                if ("granted".equals(r)) {
                    won++;
                    waiter.unlock();
                    continue;
                }
                assertTrue(r instanceof InterruptedException, "round " + i + ": " + r);
                left++;
                assertEquals(0, waiter.token(), "the interrupted handle claims no token");
                // The same session locking again at once waits for the cancel to give a
                // raced grant back, rather than being refused ALREADY_HELD.
                DistributedLock again = sb.lock(name);
                assertTrue(again.tryLock(), "round " + i + ": locking again right after the interrupt");
                again.unlock();
                eventually("the waiter that left holds nothing", Duration.ofSeconds(2),
                        () -> !holders(client, name).contains(sb.id()) && waiters(client, name).isEmpty());
            }
            System.out.println("grant racing an interrupt: granted before it " + won + ", gave up " + left);
            assertEquals(10, won + left);
        }
    }
}
