/**
 * The leader node killed (SIGKILL) under a client: a held lock stays held
 * under the same token by the same, still valid session; a waiter still
 * gets the lock; an election goes on and `observe` carries on through the
 * failover without showing the user an error.
 */

import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, Grant } from "../src";
import { eventually, sleep, within, withCluster } from "./cluster";

test("a leader kill while holding keeps the lock, its token and the session", { timeout: 60_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints);
    try {
      const s = await client.session({ ttlMs: 10_000 });
      const g = await s.lock("kill/held", { timeoutMs: 5_000 });
      const leader = await cluster.waitForLeader();
      await cluster.kill(leader);
      await cluster.waitForLeader(30_000, leader);
      // Well past a keep-alive interval, so renewals must have moved to the
      // new leader for the session to still count.
      await sleep(4_000);
      assert.ok(s.valid && g.valid, "the session must survive a failover well inside its TTL");
      const v = await client.validate("kill/held", g.token);
      assert.ok(v.valid, "the same token is still the holder's");
      assert.equal(v.currentToken, g.token);
      const info = await client.describe("kill/held");
      assert.deepEqual(info.holders.map((h) => [h.sessionId, h.token]), [[s.id, g.token]]);
      const other = await client.session({ ttlMs: 10_000 });
      assert.equal(await other.tryLock("kill/held"), null);
      await g.release();
      const g2 = await other.lock("kill/held", { timeoutMs: 5_000 });
      assert.ok(g2.token > g.token);
    } finally {
      await client.close();
    }
  }),
);

test("a leader kill while waiting still grants the waiter", { timeout: 60_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints);
    try {
      const a = await client.session({ ttlMs: 10_000 });
      const b = await client.session({ ttlMs: 10_000 });
      const ga = await a.lock("kill/wait", { timeoutMs: 5_000 });
      const waiting = b.lock("kill/wait", { timeoutMs: 30_000 });
      await eventually("b queued", async () => (await client.describe("kill/wait")).waiters.length === 1);
      const leader = await cluster.waitForLeader();
      await cluster.kill(leader);
      await cluster.waitForLeader(30_000, leader);
      await ga.release();
      const gb = await within(waiting, 30_000, "the waiter granted");
      assert.ok(gb.token > ga.token);
      assert.equal(gb.session, b);
      assert.ok((await client.validate("kill/wait", gb.token)).valid);
      const info = await client.describe("kill/wait");
      assert.equal(info.holders.length, 1, "granted once, not twice");
      assert.deepEqual(info.waiters, []);
    } finally {
      await client.close();
    }
  }),
);

test("an election and observe go on through a failover", { timeout: 90_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints);
    try {
      const a = await client.session({ ttlMs: 10_000 });
      const b = await client.session({ ttlMs: 10_000 });
      const seen: (string | null)[] = [];
      const observation = client.observe("elect/svc");
      // Any error from the iteration fails the test: failovers must not show.
      const watching = (async () => {
        for await (const g of observation) seen.push(g === null ? null : g.metadataText);
      })();
      const la = await a.campaign("elect/svc", "node-a", { timeoutMs: 5_000 });
      const waiting = b.campaign("elect/svc", "node-b", { timeoutMs: 30_000 });
      await la.proclaim("node-a-v2");
      assert.equal(la.valueText, "node-a-v2");
      const leader: Grant | null = await client.leader("elect/svc");
      assert.ok(leader !== null && leader.metadataText === "node-a-v2" && leader.token === la.token);
      await eventually("observe saw the proclaim", () => seen[seen.length - 1] === "node-a-v2");

      const raftLeader = await cluster.waitForLeader();
      await cluster.kill(raftLeader);
      await cluster.waitForLeader(30_000, raftLeader);
      assert.ok(la.valid, "leadership survives the failover");
      await la.resign();
      const lb = await within(waiting, 30_000, "b elected");
      assert.ok(lb.token > la.token);
      await eventually("observe saw the new leader after the failover", () => seen[seen.length - 1] === "node-b", 20_000);
      observation.close();
      await within(watching, 5_000, "the observation ended without an error");
      assert.ok(seen.includes("node-a") || seen.includes("node-a-v2"));
      // Each change once (a reopened stream repeats nothing already seen).
      for (let i = 1; i < seen.length; i++) assert.notEqual(seen[i], seen[i - 1], `repeated value in ${JSON.stringify(seen)}`);
    } finally {
      await client.close();
    }
  }),
);

test("a frozen leader (SIGSTOP) is left behind by calls in flight and by observe", { timeout: 90_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints, { probeIntervalMs: 1_000 });
    try {
      const a = await client.session({ ttlMs: 10_000 });
      const b = await client.session({ ttlMs: 10_000 });
      const ga = await a.lock("frozen/a", { timeoutMs: 5_000 });
      const waiting = b.lock("frozen/a", { timeoutMs: 60_000 });
      const seen: string[] = [];
      const observation = client.observe("frozen/e");
      const watching = (async () => {
        for await (const g of observation) if (g) seen.push(g.metadataText);
      })();
      const leadership = await a.campaign("frozen/e", "v1", { timeoutMs: 5_000 });
      await eventually("b queued and observe running", async () => (await client.describe("frozen/a")).waiters.length === 1 && seen.includes("v1"));
      const frozen = await cluster.waitForLeader();
      // A frozen node keeps its connections open and answers nothing: only
      // the client's own checks can tell.
      cluster.procs.get(frozen)!.kill("SIGSTOP");
      try {
        await cluster.waitForLeader(30_000, frozen);
        const started = Date.now();
        await ga.release();
        await leadership.proclaim("v2");
        const gb = await within(waiting, 20_000, "the waiter granted by the new leader");
        assert.ok(gb.token > ga.token);
        assert.ok(Date.now() - started < 15_000, `calls took ${Date.now() - started} ms to leave the frozen node`);
        await eventually("observe moved to the new leader", () => seen.includes("v2"), 15_000);
        assert.ok(a.valid && b.valid, "sessions renewed on the new leader");
      } finally {
        cluster.procs.get(frozen)?.kill("SIGCONT");
      }
      observation.close();
      await within(watching, 5_000, "the observation ended without an error");
    } finally {
      await client.close();
    }
  }),
);
