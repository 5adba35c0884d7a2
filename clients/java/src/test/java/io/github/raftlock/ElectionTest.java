package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static io.github.raftlock.Util.waiters;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ElectionTest extends OnSharedCluster {
    private static String poll(BlockingQueue<String> q) throws InterruptedException {
        String v = q.poll(10, TimeUnit.SECONDS);
        if (v == null) {
            throw new AssertionError("nothing observed");
        }
        return v;
    }

    @Test
    void latchesHandOverAndObserveSeesEveryLeader() throws Exception {
        String name = "elect/latch";
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        try (Observer o = client.observe(name, (leader, err) -> seen.add(err != null ? "error" : leader.map(Grant::value).orElse("")));
             Session sa = client.newSession(); Session sb = client.newSession()) {
            assertEquals("", poll(seen), "no leader yet");
            assertThrows(NoLeaderException.class, () -> client.electionLeader(name));
            LeaderLatch a = new LeaderLatch(sa, name, "node-a");
            LeaderLatch b = new LeaderLatch(sb, name, "node-b");
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            a.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    events.add("a leads");
                }

                @Override
                public void notLeader() {
                    events.add("a stepped down");
                }
            });
            a.start();
            a.await();
            assertTrue(a.hasLeadership());
            assertEquals("a leads", events.poll(5, TimeUnit.SECONDS));
            assertEquals("node-a", poll(seen));
            b.start();
            eventually("b in line", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            assertFalse(b.await(Duration.ofMillis(200)));
            Grant g = client.electionLeader(name);
            assertEquals("node-a", g.value());
            assertEquals(a.token(), g.token());
            a.close();
            assertEquals("a stepped down", events.poll(5, TimeUnit.SECONDS));
            assertTrue(b.await(Duration.ofSeconds(5)), "the next in line is elected at once");
            assertTrue(b.token() > g.token(), "terms of office increase");
            assertEquals("node-b", poll(seen));
            b.close();
            assertEquals("", poll(seen));
        }
    }

    @Test
    void selectorRunsTheWorkWhileLeadingAndProclaims() throws Exception {
        String name = "elect/selector";
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        try (Session sa = client.newSession(); Session sb = client.newSession();
             Observer o = client.observe(name, (leader, err) -> seen.add(leader.map(Grant::value).orElse("")))) {
            assertEquals("", poll(seen));
            BlockingQueue<String> ran = new LinkedBlockingQueue<>();
            LeaderSelector a = new LeaderSelector(sa, name, "sel-a", e -> {
                ran.add("a " + e.token());
                e.proclaim("sel-a2");
                Thread.sleep(60_000);
            });
            LeaderSelector b = new LeaderSelector(sb, name, "sel-b", e -> {
                ran.add("b " + e.token());
                // Long enough for the observer to see it before b gives leadership up.
                Thread.sleep(500);
            });
            a.start();
            assertTrue(poll(ran).startsWith("a "));
            eventually("a proclaimed", Duration.ofSeconds(5), () -> seen.contains("sel-a2"));
            assertTrue(a.hasLeadership());
            b.start();
            eventually("b in line", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            a.close();
            assertTrue(poll(ran).startsWith("b "), "closing a interrupts its work and hands over");
            b.close();
            eventually("nobody leads after b returned", Duration.ofSeconds(5), () -> seen.contains("sel-b") && "".equals(lastOf(seen)));
        }
    }

    private static String lastOf(BlockingQueue<String> q) {
        String last = null;
        for (String s : q) {
            last = s;
        }
        return last;
    }

    @Test
    void campaignWithAWaitTimesOutAndAnInterruptLeavesTheLine() throws Exception {
        String name = "elect/campaign";
        try (Session sa = client.newSession(); Session sb = client.newSession()) {
            Election a = sa.election(name);
            a.campaign("a");
            assertTrue(a.isLeader());
            Election b = sb.election(name);
            assertThrows(WaitTimedOutException.class, () -> b.campaign("b", Duration.ofMillis(300)));
            assertThrows(NotLeadingException.class, () -> b.proclaim("x"));
            Thread t = new Thread(() -> {
                try {
                    b.campaign("b");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            t.start();
            eventually("b in line", Duration.ofSeconds(10), () -> waiters(client, name).size() == 1);
            t.interrupt();
            t.join(2000);
            eventually("b left the line", Duration.ofSeconds(2), () -> waiters(client, name).isEmpty());
            a.resign();
            assertFalse(a.isLeader());
            assertThrows(NoLeaderException.class, () -> client.electionLeader(name));
        }
    }
}
