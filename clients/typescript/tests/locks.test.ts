/**
 * Locks on one real cluster: exclusion across processes, FIFO order,
 * strictly increasing tokens, shared locks and semaphores (several permits
 * per hold, resizes), hold caps, lock-delay after a dead holder, withLock,
 * exactly-once under a lost answer, and every refusal a client can cause
 * arriving as its typed error.
 */

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import {
  AlreadyHeld,
  Client,
  HoldExpired,
  Interceptor,
  InvalidName,
  LockGuard,
  LockLost,
  NotHolder,
  PermitsMismatch,
  SessionGone,
  SessionLost,
  StaleToken,
  TtlOutOfRange,
  Unavailable,
  WaitTimedOut,
  safetyMargin,
  withLock,
} from "../src";
import { TestCluster, eventually, exited, sleep, track, withCluster, within } from "./cluster";

const HOLDER = path.join(__dirname, "helpers", "holder.js");

describe("locks on a real cluster", () => {
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

  test("mutual exclusion across processes, with increasing tokens", { timeout: 120_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "raftlock-ts-mutex-"));
    try {
      const out = path.join(dir, "holds");
      const procs = [0, 1, 2, 3].map(() =>
        track(spawn(process.execPath, [HOLDER, cluster.endpoints.join(","), "px/mutex", "10000", "mutex:10", out], { stdio: "inherit" })),
      );
      for (const p of procs) assert.equal(await exited(p, 110_000), 0, "a contending process failed");
      const holds = fs
        .readFileSync(out, "utf8")
        .trim()
        .split("\n")
        .map((l) => l.split(" "))
        .filter((f) => f[0] === "hold")
        .map(([, token, start, end]) => ({ token: BigInt(token!), start: Number(start), end: Number(end) }))
        .sort((a, b) => a.start - b.start);
      assert.equal(holds.length, 40);
      for (let i = 1; i < holds.length; i++) {
        const [a, b] = [holds[i - 1]!, holds[i]!];
        assert.ok(a.end <= b.start, `holds overlap: token ${a.token} until ${a.end}, token ${b.token} from ${b.start}`);
        assert.ok(b.token > a.token, `tokens must increase in grant order: ${a.token} then ${b.token}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("waiters are granted in FIFO order with strictly increasing tokens", { timeout: 60_000 }, async () => {
    const holder = await client.session();
    const first = await holder.lock("fifo/a", { timeoutMs: 5_000 });
    const order: { i: number; token: bigint }[] = [];
    const waits: Promise<void>[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await client.session();
      waits.push(
        withLock(s, "fifo/a", async (g) => {
          order.push({ i, token: g.token });
          await sleep(30);
        }, { timeoutMs: 30_000 }),
      );
      // Queue one after the other, so that the expected order is known.
      await eventually(`waiter ${i} queued`, async () => (await client.describe("fifo/a")).waiters.length === i + 1);
    }
    await first.release();
    await Promise.all(waits);
    assert.deepEqual(order.map((o) => o.i), [0, 1, 2, 3]);
    const tokens = [first.token, ...order.map((o) => o.token)];
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(", ")}`);
  });

  test("a try-lock of a busy lock is null; shared locks and semaphores", { timeout: 60_000 }, async () => {
    const a = await client.session();
    const b = await client.session();
    const c = await client.session();
    const g = await a.lock("try/a");
    assert.equal(await b.tryLock("try/a"), null);
    await g.release();
    const g2 = await b.tryLock("try/a");
    assert.ok(g2 instanceof LockGuard && g2.token > g.token);
    await g2.release();

    const readers = await Promise.all([a, b, c].map((s) => s.lock("try/rw", { shared: true, timeoutMs: 5_000 })));
    const writer = await client.session();
    assert.equal(await writer.tryLock("try/rw"), null, "no exclusive holder beside shared ones");
    await Promise.all(readers.map((r) => r.release()));
    const w = await writer.lock("try/rw", { timeoutMs: 5_000 });
    assert.equal(w.grant.mode, "exclusive");
    await w.release();

    const p1 = await a.lock("try/sem", { permits: 2, metadata: "one" });
    const p2 = await b.lock("try/sem", { permits: 2, metadata: "two" });
    assert.equal(await c.tryLock("try/sem", { permits: 2 }), null, "two permits, both taken");
    const info = await client.describe("try/sem");
    assert.equal(info.permits, 2);
    assert.deepEqual(info.holders.map((h) => h.metadataText), ["one", "two"]);
    await p1.release();
    const p3 = await c.lock("try/sem", { permits: 2, timeoutMs: 5_000 });
    assert.ok(p3.token > p2.token);
    await Promise.all([p2.release(), p3.release()]);
    assert.deepEqual((await client.describe("try/sem")).holders, []);
  });

  test("a downgraded writer keeps its token and lets the queued reader in", { timeout: 30_000 }, async () => {
    const [writer, reader, other] = [await client.session(), await client.session(), await client.session()];
    const guard = await writer.lock("rw/routes");
    const token = guard.token;
    const reading = reader.lock("rw/routes", { shared: true, timeoutMs: 20_000 });
    await eventually("the reader queued", async () => (await client.describe("rw/routes")).waiters.length === 1);
    await guard.downgrade();
    assert.equal(guard.token, token, "the token names the same hold");
    assert.equal(guard.grant.mode, "shared");
    const read = await within(reading, 5_000, "the reader let in by the downgrade");
    assert.ok(read.token > token);
    assert.equal(await other.tryLock("rw/routes"), null, "a writer still cannot hold it");
    await guard.downgrade();
    assert.equal((await client.describe("rw/routes")).holders.length, 2, "a retry changes nothing");
    await Promise.all([read.release(), guard.release()]);
    await Promise.all([writer.close(), reader.close(), other.close()]);
  });

  test("withLock releases when the function throws, and with a client makes its own session", { timeout: 30_000 }, async () => {
    const s = await client.session();
    await assert.rejects(
      withLock(s, "with/a", () => {
        throw new Error("boom");
      }),
      /boom/,
    );
    assert.deepEqual((await client.describe("with/a")).holders, []);
    const token = await withLock(client, "with/a", async (g) => {
      assert.ok(g.valid);
      assert.ok((await client.validate("with/a", g.token)).valid);
      return g.token;
    });
    assert.equal(typeof token, "bigint");
    assert.deepEqual((await client.describe("with/a")).holders, []);
  });

  test("an acquire whose answer is lost is retried and granted once", { timeout: 30_000 }, async () => {
    let dropped = 0;
    // Lets the first acquire reach the server, then loses its answer, as a
    // broken connection would.
    const dropFirst: Interceptor = async (call, next) => {
      const answer = await next();
      if (call.path === "/v1/lock/acquire" && dropped === 0) {
        dropped++;
        throw new Unavailable("answer lost (injected)", { code: "UNAVAILABLE" });
      }
      return answer;
    };
    const c = await Client.connect(cluster.endpoints, { interceptors: [dropFirst] });
    try {
      const s = await c.session();
      const g = await s.lock("once/a", { timeoutMs: 5_000 });
      assert.equal(dropped, 1);
      const info = await c.describe("once/a");
      assert.deepEqual(info.holders.map((h) => h.token), [g.token], "the retry must not grant twice");
      assert.deepEqual(info.waiters, []);
      await g.release();
    } finally {
      await c.close();
    }
  });

  test("refusals arrive as typed errors with the server's reason", { timeout: 30_000 }, async () => {
    await assert.rejects(client.session({ ttlMs: 200 }), (e: unknown) => e instanceof TtlOutOfRange && e.reason === "TTL_OUT_OF_RANGE");
    const s = await client.session();
    await assert.rejects(s.lock("", { timeoutMs: 1_000 }), (e: unknown) => e instanceof InvalidName && e.reason === "INVALID_NAME" && e.code === "INVALID_ARGUMENT");
    await assert.rejects(s.tryLock("a\nb"), (e: unknown) => e instanceof InvalidName && e.reason === "INVALID_NAME");
    await assert.rejects(client.describe("x".repeat(513)), (e: unknown) => e instanceof InvalidName);
    const g = await s.lock("typed/a");
    const stale = new LockGuard(s, { ...g.grant, token: g.token + 1n });
    await assert.rejects(stale.release(), (e: unknown) => e instanceof StaleToken && e.reason === "STALE_TOKEN");
    await assert.rejects(s.lock("typed/a", { timeoutMs: 1_000 }), (e: unknown) => e instanceof AlreadyHeld && e.reason === "ALREADY_HELD");
    const other = await client.session();
    const started = Date.now();
    await assert.rejects(other.lock("typed/a", { timeoutMs: 300 }), (e: unknown) => e instanceof WaitTimedOut && e.reason === "WAIT_TIMED_OUT");
    assert.ok(Date.now() - started < 3_000, "a wait must end near its timeout");
    await other.lock("typed/sem", { permits: 3 });
    await assert.rejects(s.lock("typed/sem", { permits: 2, timeoutMs: 1_000 }), (e: unknown) => e instanceof PermitsMismatch && e.reason === "PERMITS_MISMATCH");
    await g.release();
    // A guard whose lock is gone: releasing it again through a copy says so.
    await assert.rejects(new LockGuard(s, g.grant).release(), (e: unknown) => e instanceof NotHolder && e.reason === "NOT_HOLDER");
    const v = await client.validate("typed/a", g.token);
    assert.equal(v.valid, false);
  });

  test("a session the server ends is gone for good here too", { timeout: 30_000 }, async () => {
    const s = await client.session({ ttlMs: 1_500 });
    const g = await s.lock("gone/a");
    // Another client (raw HTTP) closes it, as an operator or a bug might.
    await rawPost(cluster, "/v1/session/close", { sessionId: String(s.id) });
    const reason = await within(g.lost, 5_000, "the session's loss noticed");
    assert.ok(reason instanceof SessionGone, `lost must resolve with SessionGone, got ${String(reason)}`);
    assert.equal(reason.reason, "SESSION_NOT_FOUND");
    assert.equal(s.valid, false);
    assert.equal(g.valid, false);
    await assert.rejects(s.lock("gone/b"), (e: unknown) => e instanceof SessionGone);
    await g.release(); // nothing to do: the session's end released it
  });

  test("a semaphore hold takes several permits, and a resize lets a waiter in at once", { timeout: 60_000 }, async () => {
    const a = await client.session();
    const b = await client.session();
    const queued = (n: number) => eventually(`${n} waiter(s) queued`, async () => (await client.describe("sem/pool")).waiters.length === n);
    const ga = await a.lock("sem/pool", { permits: 5, count: 3, timeoutMs: 5_000 });
    assert.equal(ga.grant.mode, "shared");
    assert.equal(ga.grant.count, 3);
    let bGranted = false;
    const waiting = b.lock("sem/pool", { permits: 5, count: 3, timeoutMs: 20_000 }).then((g) => {
      bGranted = true;
      return g;
    });
    await queued(1);
    const info = await client.describe("sem/pool");
    assert.equal(info.permits, 5);
    assert.equal(info.resized, false);
    assert.deepEqual(info.waiters.map((w) => [w.sessionId, w.count, w.mode]), [[b.id, 3, "shared"]]);
    await sleep(300);
    assert.equal(bGranted, false, "3 + 3 permits do not fit in 5");
    await ga.release();
    const gb = await within(waiting, 10_000, "the waiter granted once the first holder released");
    assert.equal(gb.grant.count, 3);
    assert.ok(gb.token > ga.token);

    // b holds 3 of 5; a asks for 3 again and queues.
    const again = a.lock("sem/pool", { permits: 5, count: 3, timeoutMs: 20_000 });
    await queued(1);
    await assert.rejects(client.resize("sem/pool", 2), (e: unknown) => e instanceof PermitsMismatch && e.reason === "PERMITS_MISMATCH");
    const granted = await client.resize("sem/pool", 6);
    assert.deepEqual(granted.map((g) => [g.sessionId, g.count]), [[a.id, 3]]);
    const ga2 = await within(again, 5_000, "the waiter granted by the resize");
    assert.equal(ga2.token, granted[0]!.token);
    const resized = await client.describe("sem/pool");
    assert.equal(resized.permits, 6);
    assert.equal(resized.resized, true);
    assert.deepEqual(resized.holders.map((h) => h.count), [3, 3]);
    assert.deepEqual(resized.waiters, []);
    await Promise.all([ga2.release(), gb.release()]);
    // Held by nobody, the sized semaphore is still listed, with its size.
    assert.deepEqual(
      (await client.list("sem/")).map((l) => [l.name, l.holders.length, l.permits, l.resized]),
      [["sem/pool", 0, 6, true]],
    );
    assert.deepEqual(await client.resize("sem/pool", 0), []);
    assert.deepEqual(await client.list("sem/"), []);
    await Promise.all([a.close(), b.close()]);
  });

  test("a hold cap: the guard says the lock is lost before the leader releases it", { timeout: 30_000 }, async () => {
    const s = await client.session();
    const sent = performance.now();
    const g = await s.lock("cap/a", { maxHoldMs: 1_500, timeoutMs: 5_000 });
    assert.equal(g.grant.maxHoldMs, 1_500);
    assert.ok(g.valid && g.holdUntil !== undefined);
    assert.ok(g.holdUntil <= sent + 1_500 - safetyMargin(1_500) + 10, "the cap counts from the acquire's send, less the margin");
    assert.equal(g.validUntil, g.holdUntil, "the cap ends the hold before the session's deadline");
    const reason = await within(g.lost, 5_000, "the hold cap's loss");
    const lostAt = performance.now();
    assert.ok(reason instanceof HoldExpired, `lost must resolve with HoldExpired, got ${String(reason)}`);
    assert.equal(g.valid, false);
    assert.equal(s.valid, true, "the hold is lost, the session lives on");
    // The library gave up first: the leader still has it as held.
    const held = await client.describe("cap/a");
    assert.deepEqual(held.holders.map((h) => h.token), [g.token], `the leader released the lock before the guard said it was lost (${lostAt - sent} ms)`);
    await sleep(Math.max(0, sent + 2_000 - performance.now()));
    await eventually("the leader released the hold at its cap", async () => (await client.describe("cap/a")).holders.length === 0, 1_000);
    assert.equal((await client.validate("cap/a", g.token)).valid, false);
    await g.release(); // nothing to do: the leader released it
    const g2 = await s.tryLock("cap/a");
    assert.ok(g2 !== null && g2.token > g.token && g2.holdUntil === undefined);
    await g2.release();
    await s.close();
  });

  test("a lock-delay follows a hold whose holder died; a release sets none", { timeout: 60_000 }, async () => {
    const other = await client.session();
    const s = await client.session({ ttlMs: 1_000 });
    const g = await s.lock("delay/a", { lockDelayMs: 3_000, timeoutMs: 5_000 });
    assert.equal(g.grant.lockDelayMs, 3_000);
    await g.release();
    const quick = await other.tryLock("delay/a");
    assert.ok(quick !== null, "a released lock must not be delayed");
    await quick.release();
    await s.close();

    // A holder that dies (SIGKILL) while holding with a lock-delay.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "raftlock-ts-delay-"));
    const out = path.join(dir, "holder");
    const read = (): string[][] => (fs.existsSync(out) ? fs.readFileSync(out, "utf8").trim().split("\n").map((l) => l.split(" ")) : []);
    const p = track(spawn(process.execPath, [HOLDER, cluster.endpoints.join(","), "delay/a", "1000", "hold:3000", out], { stdio: "inherit" }));
    try {
      await eventually("the holder holds", () => read().some((l) => l[0] === "held"), 20_000);
      const token = BigInt(read().find((l) => l[0] === "held")![1]!);
      p.kill("SIGKILL");
      await exited(p);
      let info = await client.describe("delay/a");
      const stop = Date.now() + 10_000;
      while (info.holders.length > 0 && Date.now() < stop) {
        await sleep(20);
        info = await client.describe("delay/a");
      }
      const goneAt = Date.now();
      assert.deepEqual(info.holders, [], "the dead holder's session must expire");
      assert.equal(info.lockDelayMs, 3_000, "the lock must be in lock-delay");
      assert.equal(await other.tryLock("delay/a"), null, "a try-lock during the lock-delay must be refused");
      let got: LockGuard | null = null;
      while (got === null && Date.now() < goneAt + 6_000) {
        await sleep(100);
        got = await other.tryLock("delay/a");
      }
      assert.ok(got !== null, "the lock must be free once the lock-delay ends");
      const waited = Date.now() - goneAt;
      assert.ok(waited >= 2_500, `granted ${waited} ms after the holder's expiry, within the 3 s delay`);
      assert.ok(got.token > token);
      assert.equal((await client.describe("delay/a")).lockDelayMs, 0);
      await got.release();
    } finally {
      p.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an aborted wait leaves the queue at once and the next live waiter is granted", { timeout: 60_000 }, async () => {
    const [a, b, c] = [await client.session({ ttlMs: 30_000 }), await client.session({ ttlMs: 30_000 }), await client.session({ ttlMs: 30_000 })];
    const held = await a.lock("cancel/ts");
    const waiters = async (): Promise<bigint[]> => (await client.describe("cancel/ts")).waiters.map((w) => w.sessionId);
    const abort = new AbortController();
    const gaveUp = b.lock("cancel/ts", { timeoutMs: 60_000, signal: abort.signal });
    await eventually("b queued", async () => (await waiters()).length === 1);
    const later = c.lock("cancel/ts", { timeoutMs: 60_000 });
    await eventually("c queued behind b", async () => (await waiters()).length === 2);
    abort.abort(new Error("shutting down"));
    await assert.rejects(gaveUp, (e: unknown) => e instanceof Error && e.message === "shutting down");
    const aborted = Date.now();
    await eventually("b gone from the queue", async () => {
      const w = await waiters();
      return w.length === 1 && w[0] === c.id;
    }, 1_000);
    console.log(`waiter gone ${Date.now() - aborted} ms after the abort`);
    await held.release();
    const got = await within(later, 10_000, "c granted");
    const info = await client.describe("cancel/ts");
    assert.deepEqual(info.holders.map((h) => h.sessionId), [c.id]);
    assert.equal(info.holders[0]!.token, got.token);
    assert.deepEqual(info.waiters, []);
    // A signal aborted before the call: nothing is sent.
    await assert.rejects(b.lock("cancel/ts", { signal: abort.signal }), (e: unknown) => e instanceof Error && e.message === "shutting down");
    await got.release();
    for (const s of [a, b, c]) await s.close();
  });

  test("locking again right after an abort that raced the grant is not refused ALREADY_HELD", { timeout: 60_000 }, async () => {
    // A grant that lands just as its wait is aborted is the session's until
    // the cancel releases it, and the next acquisition waits for that.
    const [a, b] = [await client.session({ ttlMs: 30_000 }), await client.session({ ttlMs: 30_000 })];
    const name = "cancel/ts-again";
    for (let round = 0; round < 12; round++) {
      const held = await a.lock(name);
      const abort = new AbortController();
      // Rejects once aborted: handled from the start.
      const waiting = b.lock(name, { timeoutMs: 60_000, signal: abort.signal }).catch(() => null);
      await eventually("b queued", async () => (await client.describe(name)).waiters.length === 1);
      // b's wait is aborted while the release that grants it is on its
      // way: some rounds the grant lands first.
      const release = held.release();
      await sleep(round % 4);
      abort.abort(new Error("giving up"));
      await release;
      // The answer may have come first: the caller has the guard after all.
      const g = await waiting;
      if (g) await g.release();
      const again = await b.tryLock(name);
      assert.ok(again !== null, `round ${round}: busy, held by nobody else`);
      await again.release();
    }
    for (const s of [a, b]) await s.close();
  });

  test("the examples run against the cluster", { timeout: 60_000 }, async () => {
    for (const ex of ["map-lock.js", "postgres-lock-table.js"]) {
      const p = track(
        spawn(process.execPath, [path.join(__dirname, "..", "examples", ex)], {
          stdio: "inherit",
          env: { ...process.env, RAFTLOCK_ENDPOINTS: cluster.endpoints.join(",") },
        }),
      );
      assert.equal(await exited(p, 50_000), 0, `example ${ex} failed`);
    }
  });
});

/** A call made by some other client than the library. */
async function rawPost(cluster: TestCluster, path: string, body: unknown): Promise<void> {
  const leader = cluster.clientAddrs[(await cluster.waitForLeader()) - 1]!;
  const [host, port] = leader.split(":");
  await new Promise<void>((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request({ host, port: Number(port), method: "POST", path, headers: { "content-type": "application/json", "content-length": String(payload.length) } });
    req.on("error", reject);
    req.on("response", (res) => {
      res.on("data", () => undefined);
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.end(payload);
  });
}

test("withLock aborts its function and rejects with LockLost when the lock is lost, before anyone else can hold it", { timeout: 90_000 }, () =>
  withCluster(async (cluster) => {
    const client = await Client.connect(cluster.endpoints);
    try {
      const session = await client.session({ ttlMs: 2_000 });
      const ticks: number[] = [];
      let pausedAt = 0;
      let deadline = 0;
      let abortedAt = 0;
      let paused = false;
      let settledAt = 0;
      try {
        await assert.rejects(
          withLock(session, "scope/a", async (guard, signal) => {
            // Every node paused: no keep-alive is acknowledged, so the
            // session's local deadline passes while this process runs on.
            for (const p of cluster.procs.values()) p.kill("SIGSTOP");
            paused = true;
            pausedAt = performance.now();
            signal.addEventListener("abort", () => {
              abortedAt = performance.now();
              deadline = guard.validUntil;
            });
            while (!signal.aborted) {
              ticks.push(performance.now());
              await new Promise((r) => setTimeout(r, 10));
            }
          }),
          (e: unknown) => {
            settledAt = performance.now();
            return e instanceof LockLost && e.cause instanceof SessionLost;
          },
        );
      } finally {
        if (paused) for (const p of cluster.procs.values()) p.kill("SIGCONT");
      }
      // Aborted at the guard's deadline (a timer's delay aside), which is
      // before the leader could expire the session.
      assert.ok(abortedAt >= deadline - 50, `aborted ${deadline - abortedAt} ms before the deadline`);
      assert.ok(abortedAt <= deadline + 50, `aborted ${abortedAt - deadline} ms after the deadline`);
      assert.ok(settledAt - pausedAt < 2_000, `rejected ${settledAt - pausedAt} ms after the pause`);
      assert.ok(ticks.length > 0 && ticks[ticks.length - 1]! <= deadline + 50);
    } finally {
      await client.close();
    }
  }),
);
