package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static io.github.raftlock.Util.holders;
import static io.github.raftlock.Util.waiters;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Read-write locks, semaphores, lock sets, rate limits and runOnce against a real cluster. */
class FeaturesTest extends OnSharedCluster {
    @Test
    void readersShareWritersExcludeAndADowngradedWriterLetsTheQueuedReaderIn() throws Exception {
        String name = "rw/config";
        try (Session r1 = client.newSession(); Session r2 = client.newSession(); Session w = client.newSession()) {
            DistributedReadWriteLock a = r1.readWriteLock(name);
            DistributedReadWriteLock b = r2.readWriteLock(name);
            DistributedReadWriteLock c = w.readWriteLock(name);
            a.readLock().lock();
            assertTrue(b.readLock().tryLock(), "readers share");
            assertFalse(c.writeLock().tryLock(), "a writer waits for readers");
            a.readLock().unlock();
            b.readLock().unlock();
            LockGuard wg = c.writeLock().acquire(Duration.ofSeconds(5));
            assertFalse(a.readLock().tryLock(), "a reader waits for a writer");
            CompletableFuture<LockGuard> reader = a.readLock().acquireAsync(Duration.ofSeconds(10));
            eventually("reader queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            long token = wg.token();
            wg.downgrade();
            assertEquals(LockMode.SHARED, wg.grant().mode());
            assertEquals(token, wg.token(), "a downgrade keeps the token");
            LockGuard rg = reader.get(5, TimeUnit.SECONDS);
            assertEquals(Set.of(r1.id(), w.id()), Set.copyOf(holders(client, name)));
            rg.close();
            wg.close();
        }
    }

    @Test
    void semaphorePermitsAreCounted() throws Exception {
        String name = "sem/pool";
        try (Session a = client.newSession(); Session b = client.newSession(); Session c = client.newSession()) {
            LockGuard ga = a.semaphore(name, 3).acquire(2, Duration.ofSeconds(5));
            assertEquals(2, ga.grant().count());
            LockGuard gb = b.semaphore(name, 3).tryAcquire(1);
            assertEquals(3, client.describe(name).permits());
            assertThrows(LockedException.class, () -> c.semaphore(name, 3).tryAcquire(1), "all three permits taken");
            assertThrows(PermitsMismatchException.class, () -> c.semaphore(name, 4).tryAcquire(1));
            CompletableFuture<LockGuard> waiting = CompletableFuture.supplyAsync(() -> {
                try {
                    return c.semaphore(name, 3).acquire(2, Duration.ofSeconds(10));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            eventually("c queued", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            gb.close();
            Thread.sleep(200);
            assertFalse(waiting.isDone(), "one free permit is not two");
            ga.close();
            try (LockGuard gc = waiting.get(5, TimeUnit.SECONDS)) {
                assertEquals(2, gc.grant().count());
            }
        }
    }

    @Test
    void acquireAllGrantsTheWholeSetInOneEntry() throws Exception {
        try (Session a = client.newSession(); Session b = client.newSession()) {
            try (LockSet set = a.acquireAll(List.of("set/2", "set/1", "set/2"), Duration.ofSeconds(5))) {
                assertEquals(List.of("set/1", "set/2"), set.names());
                assertEquals(set.token("set/1"), set.token("set/2"), "one log entry granted both");
                assertTrue(set.isValid());
                assertThrows(LockedException.class, () -> b.tryAcquireAll(List.of("set/1", "set/3")));
                assertEquals(List.of(), holders(client, "set/3"), "a refused set holds none of its locks");
                CompletableFuture<LockSet> waiting = CompletableFuture.supplyAsync(() -> {
                    try {
                        return b.acquireAll(List.of("set/3", "set/2"), Duration.ofSeconds(10));
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                });
                eventually("b's set queued", Duration.ofSeconds(10), () -> waiters(client, "set/2").size() == 1);
                assertEquals(List.of(b.id()), waiters(client, "set/3"), "a set waits in every queue at once");
                set.close();
                try (LockSet got = waiting.get(5, TimeUnit.SECONDS)) {
                    assertEquals(List.of("set/2", "set/3"), got.names());
                }
            }
        }
    }

    @Test
    void rateLimitsDefineTakeDescribeAndReturn() throws Exception {
        RateLimit rl = client.rateLimit("rl/api", new RateLimit.Spec(2, Duration.ofSeconds(10), 3));
        assertTrue(rl.define());
        assertFalse(rl.define(), "defining again with the same spec is no change");
        assertThrows(LimitConflictException.class, () -> client.rateLimit("rl/api", new RateLimit.Spec(5, Duration.ofSeconds(1), 3)).define());
        assertThrows(LimitNotFoundException.class, () -> client.rateLimit("rl/none", null).tryTake(1));
        RateLimit.Admission a = rl.tryTake(2);
        assertTrue(a.admitted());
        assertEquals(1, a.remaining());
        RateLimit.Admission refused = rl.tryTake(2);
        assertFalse(refused.admitted());
        assertTrue(refused.retryAfter().toMillis() > 0);
        TokenLease lease = rl.reserve(1, Duration.ofSeconds(5));
        assertNotNull(lease);
        assertNull(rl.reserve(1, Duration.ofSeconds(5)), "the bucket is empty");
        assertEquals(1, rl.describe().leases());
        assertTrue(lease.trySpend());
        assertFalse(lease.trySpend());
        assertEquals(0, lease.finish(), "nothing left to give back");
        assertTrue(client.rateLimit("rl/api", null).take(1, Duration.ofSeconds(8)).admitted(),
                "a waiting take is admitted once the bucket refills");
        RateLimit.Info info = rl.describe();
        assertEquals(2, info.spec().rate());
        assertEquals(Duration.ofSeconds(10), info.spec().per());
        assertEquals(3, info.spec().burst());
        assertTrue(info.admitted() >= 4);
        assertTrue(rl.delete());
        assertThrows(LimitNotFoundException.class, rl::describe);

        RateLimit block = client.rateLimit("rl/block", new RateLimit.Spec(1, Duration.ofHours(1), 5));
        TokenLease l = block.reserve(5, Duration.ofSeconds(5));
        assertEquals(5, l.reserved());
        assertTrue(l.trySpend());
        assertTrue(l.trySpend());
        assertEquals(3, l.left());
        assertEquals(3, l.finish(), "the unspent tokens are returned");
        assertEquals(0, l.finish(), "a second finish returns nothing");
        assertEquals(3, block.describe().available());
        assertTrue(block.delete());
    }

    @Test
    void runOnceSkipsAConcurrentRunAndHoldsAtLeast() throws Exception {
        try (Session a = client.newSession(); Session b = client.newSession()) {
            CountDownLatch running = new CountDownLatch(1);
            CountDownLatch finish = new CountDownLatch(1);
            AtomicInteger runs = new AtomicInteger();
            CompletableFuture<RunOnce.Result<Long>> first = CompletableFuture.supplyAsync(() -> {
                try {
                    return a.runOnce("cron/report", Duration.ZERO, token -> {
                        runs.incrementAndGet();
                        running.countDown();
                        finish.await();
                        return token;
                    });
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            assertTrue(running.await(10, TimeUnit.SECONDS));
            RunOnce.Result<Long> skipped = b.runOnce("cron/report", Duration.ZERO, token -> {
                runs.incrementAndGet();
                return token;
            });
            assertFalse(skipped.ran(), "another instance is running it");
            finish.countDown();
            RunOnce.Result<Long> r = first.get(10, TimeUnit.SECONDS);
            assertTrue(r.ran());
            assertTrue(r.value() > 0);
            assertEquals(1, runs.get());
            assertEquals(List.of(), holders(client, "cron/report"), "released after the run");

            // holdAtLeast: a run that finishes at once keeps the lock for the window, so an
            // instance firing a little later skips.
            long start = System.nanoTime();
            CompletableFuture<RunOnce.Result<Integer>> quick = CompletableFuture.supplyAsync(() -> {
                try {
                    return a.runOnce("cron/hourly", Duration.ofMillis(1500), token -> 7);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            eventually("the quick run holds the lock", Duration.ofSeconds(5), () -> holders(client, "cron/hourly").size() == 1);
            Thread.sleep(300);
            assertFalse(b.runOnce("cron/hourly", Duration.ZERO, token -> 8).ran(), "the late instance skips");
            assertEquals(7, quick.get(10, TimeUnit.SECONDS).value());
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(1500), "held for at least the window");
            assertTrue(b.runOnce("cron/hourly", Duration.ZERO, token -> 9).ran(), "free again after the window");
        }
    }
}
