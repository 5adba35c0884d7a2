package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static io.github.raftlock.Util.holders;
import static io.github.raftlock.Util.waiters;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Releases, resignations and cancellations that must go out whatever the interrupt flag says. */
class InterruptTest extends OnSharedCluster {
    // A TTL far longer than the tests wait: a lock found free came from the release, not
    // from the holder's session expiring.
    private static final Duration LONG_TTL = Duration.ofSeconds(60);

    @Test
    void unlockOnAnInterruptedThreadReleasesAtOnce() throws Exception {
        String name = "interrupted/unlock";
        try (Session sa = client.newSession(LONG_TTL); Session sb = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            Thread.currentThread().interrupt();
            try {
                a.unlock();
            } finally {
                assertTrue(Thread.interrupted(), "the interrupt flag is kept");
            }
            assertEquals(List.of(), holders(client, name), "released on the server");
            assertTrue(sb.lock(name).tryLock(), "another session takes it at once");
        }
    }

    @Test
    void closingAGuardOnAnInterruptedThreadReleasesAtOnce() throws Exception {
        String name = "interrupted/guard";
        try (Session sa = client.newSession(LONG_TTL); Session sb = client.newSession()) {
            LockGuard g = sa.lock(name).acquire(Duration.ofSeconds(5));
            Thread.currentThread().interrupt();
            try {
                g.close();
            } finally {
                assertTrue(Thread.interrupted(), "the interrupt flag is kept");
            }
            assertEquals(List.of(), holders(client, name), "released on the server");
            try (LockGuard other = sb.lock(name).tryAcquire()) {
                assertEquals(sb.id(), other.grant().sessionId());
            }
        }
    }

    @Test
    void resigningOnAnInterruptedThreadHandsLeadershipOn() throws Exception {
        String name = "interrupted/resign";
        try (Session sa = client.newSession(LONG_TTL); Session sb = client.newSession()) {
            Election a = sa.election(name);
            a.campaign("a");
            CompletableFuture<Void> b = CompletableFuture.runAsync(() -> {
                try {
                    sb.election(name).campaign("b", Duration.ofSeconds(20));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            eventually("b in line", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            Thread.currentThread().interrupt();
            try {
                a.resign();
            } finally {
                assertTrue(Thread.interrupted(), "the interrupt flag is kept");
            }
            b.get(3, TimeUnit.SECONDS);
            assertEquals(sb.id(), client.electionLeader(name).sessionId());
        }
    }

    /**
     * A grant that arrives after acquireAsync's future was cancelled is released by the
     * worker; the cancel's interrupt must not land in that release. The cancel is held
     * open between deciding and interrupting by a dependent of the future (they run inside
     * cancel), and the release is slowed by a partition meanwhile.
     */
    @Test
    void cancellingAnAsyncAcquireAsItIsGrantedGivesTheGrantBack() throws Exception {
        String name = "interrupted/async-race";
        RaftlockClient bc = TestCluster.shared().client();
        try (Session sa = client.newSession(); Session sb = bc.newSession(LONG_TTL); Session sc = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            CompletableFuture<LockGuard> fb = sb.lock(name).acquireAsync(Duration.ofSeconds(30));
            eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            fb.whenComplete((g, e) -> {
                // The waiting exchange is out already: only b's later calls are cut off.
                bc.transport().partitioned = true;
                a.unlock();
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
                while (System.nanoTime() < end && !holders(client, name).contains(sb.id())) {
                    Thread.onSpinWait();
                }
                try {
                    // b's worker is now retrying its release against the partition.
                    Thread.sleep(300);
                } catch (InterruptedException x) {
                    Thread.currentThread().interrupt();
                }
                bc.transport().partitioned = false;
            });
            fb.cancel(true);
            try (LockGuard g = sc.lock(name).acquire(Duration.ofSeconds(5))) {
                assertEquals(sc.id(), g.grant().sessionId());
            }
        } finally {
            bc.transport().partitioned = false;
            bc.close();
        }
    }

    /**
     * lock() keeps its place in the queue through an interrupt, even when the client could
     * not reconnect within the server's grace for a closed waiting connection.
     */
    @Test
    void anInterruptedLockKeepsItsPlaceInTheQueue() throws Exception {
        String name = "interrupted/lock-place";
        RaftlockClient bc = TestCluster.shared().client();
        try (Session sa = client.newSession(); Session sb = bc.newSession(LONG_TTL); Session sc = client.newSession()) {
            DistributedLock a = sa.lock(name);
            a.lock();
            DistributedLock bl = sb.lock(name);
            java.util.concurrent.atomic.AtomicReference<Object> bGot = new java.util.concurrent.atomic.AtomicReference<>();
            Thread b = new Thread(() -> {
                try {
                    bl.lock();
                    bGot.set(Thread.currentThread().isInterrupted() ? "granted, flag set" : "granted, flag cleared");
                } catch (Throwable t) {
                    bGot.set(t);
                }
            });
            b.start();
            eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            CompletableFuture<LockGuard> fc = sc.lock(name).acquireAsync(Duration.ofSeconds(30));
            eventually("c queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 2);
            // A reconnect, were one needed, could not happen within the server's grace.
            bc.transport().partitioned = true;
            b.interrupt();
            Thread.sleep(1000);
            bc.transport().partitioned = false;
            assertEquals(List.of(sb.id(), sc.id()), waiters(client, name), "b keeps its place");
            a.unlock();
            b.join(5000);
            assertEquals("granted, flag set", bGot.get());
            assertEquals(List.of(sb.id()), holders(client, name));
            bl.unlock();
            fc.get(5, TimeUnit.SECONDS).close();
        } finally {
            bc.transport().partitioned = false;
            bc.close();
        }
    }
}
