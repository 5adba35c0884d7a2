/**
 * Lock sets and session listing on one real cluster: a set granted in one
 * entry with a grant per lock, a try refused whole when one lock is busy, a
 * waiting set that holds nothing until all of it is free, an aborted wait
 * that leaves nothing held or queued, exactly-once under a lost answer,
 * and the live sessions as the leader lists them, page by page.
 */

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Interceptor, InvalidArgument, LockGuard, LockSet, Session, Unavailable, WaitTimedOut } from "../src";
import { TestCluster, eventually, sleep, within } from "./cluster";

describe("lock sets on a real cluster", () => {
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

  const holders = async (name: string): Promise<bigint[]> => (await client.describe(name)).holders.map((h) => h.sessionId);
  const waiters = async (name: string): Promise<bigint[]> => (await client.describe(name)).waiters.map((w) => w.sessionId);

  test("a set is granted at once, one grant per lock, each fencing its own lock", { timeout: 30_000 }, async () => {
    const s = await client.session();
    // Earlier grants of one of the locks: the set's token must pass them.
    const before = await s.lock("set/b");
    await before.release();
    const set = await s.lockAll(["set/c", "set/b", "set/a", "set/b"], { timeoutMs: 5_000, metadata: "transfer 1" });
    assert.ok(set instanceof LockSet);
    assert.deepEqual(set.names, ["set/a", "set/b", "set/c"], "name order, repeats once");
    assert.equal(set.guards.length, 3);
    assert.ok(set.valid);
    for (const g of set.guards) {
      assert.ok(g instanceof LockGuard);
      assert.equal(g.grant.sessionId, s.id);
      assert.equal(g.grant.mode, "exclusive");
      assert.equal(g.grant.metadataText, "transfer 1");
      const info = await client.describe(g.name);
      assert.deepEqual(info.holders.map((h) => [h.sessionId, h.token]), [[s.id, g.token]], `${g.name} held by the set's session under its token`);
      assert.ok((await client.validate(g.name, g.token)).valid);
      assert.equal(set.tokens.get(g.name), g.token);
    }
    // One log entry granted the set: its grants share that entry's token,
    // past every earlier grant of each lock.
    assert.equal(new Set(set.tokens.values()).size, 1, `tokens ${[...set.tokens.values()].join(", ")}`);
    assert.ok(set.guard("set/b")!.token > before.token);
    assert.equal(set.guard("set/z"), undefined);

    // Each lock is released on its own; release() releases the rest.
    await set.guard("set/a")!.release();
    assert.deepEqual(await holders("set/a"), []);
    assert.deepEqual(await holders("set/b"), [s.id]);
    await set.release();
    for (const n of set.names) assert.deepEqual(await holders(n), [], `${n} released`);
    await set.release(); // twice: nothing to do
    await s.close();
  });

  test("a try on a set one of whose locks is busy is refused whole: nothing held, nothing queued", { timeout: 30_000 }, async () => {
    const blocker = await client.session();
    const s = await client.session({ clientName: "try-set-session" });
    const busy = await blocker.lock("tryset/b");
    assert.equal(await s.tryLockAll(["tryset/a", "tryset/b", "tryset/c"]), null);
    for (const n of ["tryset/a", "tryset/c"]) {
      assert.deepEqual(await holders(n), [], `${n} must not be taken by a refused set`);
      assert.deepEqual(await waiters(n), []);
    }
    assert.deepEqual(await holders("tryset/b"), [blocker.id]);
    assert.deepEqual(await waiters("tryset/b"), []);
    const [mine] = (await client.sessions("try-set-session")).filter((i) => i.sessionId === s.id);
    assert.ok(mine !== undefined, "the session is listed");
    assert.deepEqual([mine.held, mine.waiting], [[], []]);
    // The free lock alone is still free for anyone.
    const a = await blocker.tryLock("tryset/a");
    assert.ok(a !== null);
    await a.release();

    await busy.release();
    const set = await s.tryLockAll(["tryset/a", "tryset/b", "tryset/c"]);
    assert.ok(set !== null, "free now");
    assert.ok(set.guard("tryset/b")!.token > busy.token);
    await set.release();
    await Promise.all([blocker.close(), s.close()]);
  });

  test("a waiting set holds none of its locks until the blocker releases, then all of them", { timeout: 60_000 }, async () => {
    const blocker = await client.session();
    const s = await client.session();
    const busy = await blocker.lock("waitset/b");
    let granted: LockSet | undefined;
    const waiting = s.lockAll(["waitset/a", "waitset/b"], { timeoutMs: 30_000 }).then((set) => (granted = set));
    await eventually("the set queued on both locks", async () => (await waiters("waitset/a")).length === 1 && (await waiters("waitset/b")).length === 1);
    assert.deepEqual(await waiters("waitset/a"), [s.id]);
    assert.deepEqual(await holders("waitset/a"), [], "a free lock of a waiting set is not taken alone");
    await sleep(300);
    assert.equal(granted, undefined, "granted while a lock of the set was busy");
    // The free lock's queue is the set's: another session queues behind it.
    const other = await client.session();
    assert.equal(await other.tryLock("waitset/a"), null);

    await busy.release();
    const set = await within(waiting, 10_000, "the set granted once the blocker released");
    assert.deepEqual(set.names, ["waitset/a", "waitset/b"]);
    for (const g of set.guards) assert.deepEqual(await holders(g.name), [s.id]);
    assert.ok(set.guard("waitset/b")!.token > busy.token);
    assert.deepEqual(await waiters("waitset/a"), []);
    await set.release();

    // A wait that runs out leaves no waiter behind.
    const again = await blocker.lock("waitset/b");
    const started = Date.now();
    await assert.rejects(s.lockAll(["waitset/a", "waitset/b"], { timeoutMs: 300 }), (e: unknown) => e instanceof WaitTimedOut && e.reason === "WAIT_TIMED_OUT");
    assert.ok(Date.now() - started < 3_000, "a wait must end near its timeout");
    assert.deepEqual(await waiters("waitset/a"), []);
    assert.deepEqual(await waiters("waitset/b"), []);
    await again.release();
    for (const x of [blocker, s, other]) await x.close();
  });

  test("aborting a waiting set takes it out of every queue and leaves no lock held", { timeout: 60_000 }, async () => {
    const blocker = await client.session({ ttlMs: 30_000 });
    const s = await client.session({ ttlMs: 30_000 });
    const busy = await blocker.lock("abortset/b");
    const abort = new AbortController();
    const gaveUp = s.lockAll(["abortset/a", "abortset/b"], { timeoutMs: 60_000, signal: abort.signal });
    await eventually("the set queued", async () => (await waiters("abortset/a")).length === 1 && (await waiters("abortset/b")).length === 1);
    abort.abort(new Error("shutting down"));
    await assert.rejects(gaveUp, (e: unknown) => e instanceof Error && e.message === "shutting down");
    await eventually("the set gone from both queues", async () => (await waiters("abortset/a")).length === 0 && (await waiters("abortset/b")).length === 0, 2_000);
    // Were the wait still on the server, this release would grant it.
    await busy.release();
    await sleep(300);
    assert.deepEqual(await holders("abortset/a"), []);
    assert.deepEqual(await holders("abortset/b"), []);
    // A signal aborted before the call: nothing is sent.
    await assert.rejects(s.lockAll(["abortset/a", "abortset/b"], { signal: abort.signal }), (e: unknown) => e instanceof Error && e.message === "shutting down");

    // An abort racing the grant: whichever wins, nothing is left held
    // behind the caller's back, and the session can take the set again.
    for (let round = 0; round < 8; round++) {
      const held = await blocker.lock("abortset/b");
      const ac = new AbortController();
      const waiting = s.lockAll(["abortset/a", "abortset/b"], { timeoutMs: 60_000, signal: ac.signal }).catch(() => null);
      await eventually("the set queued", async () => (await waiters("abortset/b")).length === 1);
      const release = held.release();
      await sleep(round % 4);
      ac.abort(new Error("giving up"));
      await release;
      const won = await waiting;
      if (won) await won.release();
      const again = await s.tryLockAll(["abortset/a", "abortset/b"]);
      assert.ok(again !== null, `round ${round}: a lock of the set still held`);
      await again.release();
      assert.deepEqual([await holders("abortset/a"), await holders("abortset/b")], [[], []], `round ${round}`);
    }
    await Promise.all([blocker.close(), s.close()]);
  });

  test("a set whose answer is lost is retried with its request id and granted once", { timeout: 30_000 }, async () => {
    const seen: unknown[] = [];
    let dropped = 0;
    const dropFirst: Interceptor = async (call, next) => {
      const answer = await next();
      if (call.path === "/v1/lock/acquire-all") {
        seen.push(call.body);
        if (dropped === 0) {
          dropped++;
          throw new Unavailable("answer lost (injected)", { code: "UNAVAILABLE" });
        }
      }
      return answer;
    };
    const c = await Client.connect(cluster.endpoints, { interceptors: [dropFirst] });
    try {
      const s = await c.session();
      const single = await s.lock("onceset/x");
      const set = await s.lockAll(["onceset/b", "onceset/a"], { timeoutMs: 5_000 });
      assert.equal(dropped, 1);
      assert.equal(seen.length, 2);
      const [first, retry] = seen as Record<string, unknown>[];
      for (const k of ["requestId", "seq", "names"]) assert.deepEqual(retry![k], first![k], `a retry keeps ${k}`);
      assert.deepEqual(first!.names, ["onceset/a", "onceset/b"]);
      assert.equal(first!.seq, "2", "numbered after the session's first acquire");
      for (const g of set.guards) {
        const info = await c.describe(g.name);
        assert.deepEqual(info.holders.map((h) => h.token), [g.token], "the retry must not grant twice");
        assert.deepEqual(info.waiters, []);
      }
      await Promise.all([set.release(), single.release()]);
    } finally {
      await c.close();
    }
  });

  test("the leader lists live sessions, every page, with what they hold and wait for", { timeout: 30_000 }, async () => {
    const blocker = await client.session({ clientName: "listed-blocker" });
    const made: Session[] = [];
    for (let i = 0; i < 3; i++) made.push(await client.session({ clientName: `listed-${i}`, ttlMs: 20_000 }));
    const busy = await blocker.lock("listed/b");
    const g = await made[0]!.lock("listed/a");
    const waiting = made[1]!.lock("listed/b", { timeoutMs: 20_000 });
    await eventually("the waiter queued", async () => (await waiters("listed/b")).length === 1);

    // Two per page: four sessions take two pages.
    const listed = await client.sessions("listed-", { pageSize: 2 });
    assert.deepEqual(listed.map((i) => i.clientName), ["listed-blocker", "listed-0", "listed-1", "listed-2"], "every page, in creation order");
    assert.deepEqual(listed.map((i) => i.sessionId), [blocker.id, ...made.map((s) => s.id)]);
    const [, zero, one, two] = listed;
    assert.deepEqual([zero!.held, zero!.waiting], [["listed/a"], []]);
    assert.deepEqual([one!.held, one!.waiting], [[], ["listed/b"]]);
    assert.equal(two!.ttlMs, 20_000);
    assert.ok(two!.expiresInMs > 0 && two!.expiresInMs <= 20_000);
    assert.equal(two!.pid, process.pid);
    assert.ok(two!.createdAtMs > Date.now() - 60_000 && two!.createdAtMs <= Date.now() + 5_000);
    assert.deepEqual((await client.sessions("listed-")).map((i) => i.sessionId), listed.map((i) => i.sessionId), "one page says the same");
    assert.ok((await client.sessions()).some((i) => i.sessionId === made[2]!.id), "no prefix: every session");
    assert.deepEqual(await client.sessions("nobody-by-this-name"), []);

    await made[2]!.close();
    assert.ok(!(await client.sessions("listed-")).some((i) => i.sessionId === made[2]!.id), "a closed session is not listed");
    await busy.release();
    await (await waiting).release();
    await g.release();
    for (const s of [blocker, made[0]!, made[1]!]) await s.close();
    await assert.rejects(client.sessions("", { pageSize: 0 }), (e: unknown) => e instanceof InvalidArgument);
  });
});
