/**
 * Watching locks on real clusters: the grants and releases under a prefix
 * and nothing outside it, a handoff in the command that caused it,
 * resuming after an index, ending quietly on abort, WatchCompacted when
 * resuming past a node's history, and a watch that outlives its node.
 */

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, LockEvent, Watch, WatchBatch, WatchCompacted } from "../src";
import { TestCluster, eventually, sleep, withCluster, within } from "./cluster";

/** Reads `w` into `into` in the background; resolves when the watch ends. */
function collect(w: Watch, into: WatchBatch[]): Promise<void> {
  return (async () => {
    for await (const b of w) into.push(b);
  })();
}

const flat = (batches: WatchBatch[]): LockEvent[] => batches.flatMap((b) => b.events);
const brief = (e: LockEvent): [string, string, bigint, bigint] => [e.kind, e.name, e.sessionId, e.token];

function increasing(batches: WatchBatch[]): void {
  for (let i = 1; i < batches.length; i++) {
    assert.ok(batches[i]!.index > batches[i - 1]!.index, `indexes ${batches.map((b) => b.index).join(", ")}`);
  }
}

describe("watching locks on a real cluster", () => {
  let cluster: TestCluster;
  let client: Client;

  before(async () => {
    cluster = await TestCluster.start();
    client = await Client.connect(cluster.endpoints);
  });
  after(async () => {
    await client?.close();
    await cluster?.close();
  });

  test("a grant and a release under the prefix arrive in order, resumable after an index", { timeout: 30_000 }, async () => {
    // Created first: the watch opens at an index past it.
    const s = await client.session();
    const stop = new AbortController();
    const w = client.watch("wt/", { signal: stop.signal });
    assert.equal(w.index, 0n, "nothing sent before it is iterated");
    const batches: WatchBatch[] = [];
    const reading = collect(w, batches);
    await eventually("the watch opened", () => w.index > 0n);
    const opened = w.index;

    // Outside the prefix: not seen.
    const outside = await s.lock("wtx");
    await outside.release();
    const g = await s.lock("wt/a", { metadata: "m1" });
    await g.release();
    await eventually("both events seen", () => flat(batches).length >= 2);
    await sleep(200);
    assert.deepEqual(flat(batches).map(brief), [
      ["granted", "wt/a", s.id, g.token],
      ["released", "wt/a", s.id, g.token],
    ]);
    assert.equal(batches.length, 2, "one batch per command");
    increasing(batches);
    assert.ok(batches[0]!.index > opened);
    assert.equal(batches[0]!.events[0]!.metadataText, "m1");
    assert.equal(batches[0]!.events[0]!.mode, "exclusive");
    assert.ok(batches[0]!.atMs > Date.now() - 60_000 && batches[0]!.atMs <= Date.now() + 5_000);
    assert.equal(w.index, batches[1]!.index, "the resume point follows what was delivered");

    // Resumed after the grant: the release comes first, then live events.
    const resumed = client.watch("wt/", { afterIndex: batches[0]!.index });
    const first = await within(resumed.next(), 5_000, "the resumed watch's first batch");
    assert.equal(first.done, false);
    assert.deepEqual(first.value, batches[1]);
    const fromOpening = client.watch("wt/", { afterIndex: String(opened) });
    const both = [await within(fromOpening.next(), 5_000, "first"), await within(fromOpening.next(), 5_000, "second")];
    assert.deepEqual(both.map((r) => r.value), batches);
    fromOpening.close();
    assert.deepEqual(await fromOpening.next(), { done: true, value: undefined });
    const g2 = await s.lock("wt/b");
    const live = await within(resumed.next(), 5_000, "the resumed watch's live batch");
    assert.deepEqual(live.value!.events.map(brief), [["granted", "wt/b", s.id, g2.token]]);
    await resumed.return();

    // Aborting ends the iteration quietly, even while it waits.
    await g2.release();
    await eventually("the release seen", () => flat(batches).length === 4);
    stop.abort();
    await within(reading, 2_000, "the watch ended on abort");
    await s.close();
    assert.ok(flat(batches).every((e) => e.name.startsWith("wt/")));
  });

  test("a handoff is reported in the command that freed the lock", { timeout: 30_000 }, async () => {
    const [a, b] = [await client.session(), await client.session()];
    const w = client.watch("wh/");
    const batches: WatchBatch[] = [];
    const reading = collect(w, batches);
    await eventually("the watch opened", () => w.index > 0n);
    const held = await a.lock("wh/x");
    const waiting = b.lock("wh/x", { timeoutMs: 10_000 });
    await eventually("b queued", async () => (await client.describe("wh/x")).waiters.length === 1);
    await held.release();
    const got = await waiting;
    await eventually("three events seen", () => flat(batches).length >= 3);
    assert.deepEqual(batches.map((x) => x.events.map(brief)), [
      [["granted", "wh/x", a.id, held.token]],
      [
        ["released", "wh/x", a.id, held.token],
        ["handoff", "wh/x", b.id, got.token],
      ],
    ]);
    w.close();
    await within(reading, 2_000, "the watch ended on close");
    await Promise.all([a.close(), b.close()]);
  });
});

test("a watch resuming past its node's history ends with WatchCompacted", { timeout: 60_000 }, () =>
  withCluster(
    async (cluster) => {
      const client = await Client.connect(cluster.endpoints);
      try {
        const s = await client.session();
        const w = client.watch("wc/");
        const batches: WatchBatch[] = [];
        const reading = collect(w, batches);
        await eventually("the watch opened", () => w.index > 0n);
        const g = await s.lock("wc/a");
        await eventually("the grant seen", () => batches.length === 1);
        const old = batches[0]!.index;
        // Each node remembers the events of one command: these push the
        // grant out of every node's history.
        await g.release();
        for (let i = 0; i < 3; i++) await (await s.lock("wc/a")).release();
        await eventually("every command seen live", () => batches.length === 8);
        await sleep(500); // the followers apply them too
        increasing(batches);

        const late = client.watch("wc/", { afterIndex: old });
        await assert.rejects(within(late.next(), 10_000, "the late watch's answer"), (e: unknown) => e instanceof WatchCompacted && e.reason === "WATCH_COMPACTED");
        assert.deepEqual(await late.next(), { done: true, value: undefined }, "the watch ends with it");
        // The latest command is still remembered: resuming before it works.
        const recent = client.watch("wc/", { afterIndex: batches[6]!.index });
        assert.deepEqual((await within(recent.next(), 5_000, "the recent watch's answer")).value, batches[7]);
        recent.close();
        w.close();
        await reading;
        await s.close();
      } finally {
        await client.close();
      }
    },
    { extra: ["--watch-history", "1"] },
  ),
);

test("a watch outlives its node: it resumes on another without a gap or a repeat", { timeout: 90_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints, { probeIntervalMs: 500 });
    try {
      const s = await client.session({ ttlMs: 15_000 });
      const w = client.watch("wf/");
      const batches: WatchBatch[] = [];
      const reading = collect(w, batches);
      await eventually("the watch opened", () => w.index > 0n);
      const g1 = await s.lock("wf/a");
      await g1.release();
      await eventually("the first two events seen", () => batches.length === 2);
      // The watch's node is the one the client talks to: the leader.
      const leader = await cluster.waitForLeader();
      await cluster.kill(leader);
      await cluster.waitForLeader(30_000, leader);
      const g2 = await s.lock("wf/b", { timeoutMs: 20_000 });
      await g2.release();
      await eventually("the events after the failover seen", () => batches.length >= 4, 20_000);
      await sleep(300);
      assert.deepEqual(flat(batches).map(brief), [
        ["granted", "wf/a", s.id, g1.token],
        ["released", "wf/a", s.id, g1.token],
        ["granted", "wf/b", s.id, g2.token],
        ["released", "wf/b", s.id, g2.token],
      ]);
      increasing(batches);
      w.close();
      await within(reading, 2_000, "the watch ended on close");
    } finally {
      await client.close();
    }
  }),
);
