/**
 * Locks on one real cluster: exclusion across processes, FIFO order,
 * strictly increasing tokens, shared locks and semaphores, withLock,
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
  Interceptor,
  InvalidName,
  LockGuard,
  NotHolder,
  PermitsMismatch,
  SessionGone,
  StaleToken,
  TtlOutOfRange,
  Unavailable,
  WaitTimedOut,
  withLock,
} from "../src";
import { TestCluster, eventually, exited, sleep, track, within } from "./cluster";

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
