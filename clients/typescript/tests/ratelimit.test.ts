/**
 * Rate limits on one real cluster: a burst admitted and the next take
 * refused with the wait after which it fits, a take that waits on the
 * server, conflicting and unknown limits as typed errors, and token leases
 * that give back what they did not spend (on finish, when the client
 * closes).
 */

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, InvalidArgument, LimitConflict, LimitNotFound, TokenLease, safetyMargin } from "../src";
import { TestCluster, sleep } from "./cluster";

describe("rate limits on a real cluster", () => {
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

  test("a burst is admitted, the next take refused with its wait, and a waiting take admitted", { timeout: 30_000 }, async () => {
    const limit = client.rateLimit("rl/burst", { rate: 5, perMs: 1_000, burst: 5 });
    for (let i = 0; i < 5; i++) {
      const a = await limit.tryTake();
      assert.ok(a.admitted && a.n === 1, `take ${i}: ${JSON.stringify(a)}`);
    }
    const refused = await limit.tryTake();
    assert.equal(refused.admitted, false);
    assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 250, `retryAfterMs ${refused.retryAfterMs}`);
    const started = Date.now();
    const waited = await limit.take(1, { waitMs: 2_000 });
    assert.ok(waited.admitted && waited.n === 1, JSON.stringify(waited));
    assert.ok(Date.now() - started < 2_000, `took ${Date.now() - started} ms`);
    const info = await limit.describe();
    assert.deepEqual([info.name, info.rate, info.perMs, info.burst], ["rl/burst", 5, 1_000, 5]);
    assert.equal(info.admitted, 6);
    assert.ok(info.refused >= 1);
    assert.ok(info.appliedIndex > 0n);
  });

  test("conflicting parameters and unknown limits are typed errors", { timeout: 30_000 }, async () => {
    assert.equal(await client.rateLimit("rl/defined", { rate: 10, burst: 10 }).define(), true);
    assert.equal(await client.rateLimit("rl/defined", { rate: 10, perMs: 1_000, burst: 10 }).define(), false);
    await assert.rejects(
      client.rateLimit("rl/defined", { rate: 20, burst: 10 }).tryTake(),
      (e: unknown) => e instanceof LimitConflict && e.reason === "LIMIT_CONFLICT" && e.code === "FAILED_PRECONDITION",
    );
    await assert.rejects(client.rateLimit("rl/defined", { rate: 10, perMs: 60_000, burst: 10 }).define(), (e: unknown) => e instanceof LimitConflict);
    // Without parameters the limit must exist.
    assert.ok((await client.rateLimit("rl/defined").tryTake()).admitted);
    await assert.rejects(
      client.rateLimit("rl/unknown").tryTake(),
      (e: unknown) => e instanceof LimitNotFound && e.reason === "LIMIT_NOT_FOUND" && e.code === "NOT_FOUND",
    );
    await assert.rejects(client.rateLimit("rl/unknown").describe(), (e: unknown) => e instanceof LimitNotFound);
    await assert.rejects(client.rateLimit("rl/unknown").define(), (e: unknown) => e instanceof InvalidArgument);
    assert.throws(() => client.rateLimit("rl/x", { burst: 3 }), (e: unknown) => e instanceof InvalidArgument);
    assert.equal(await client.rateLimit("rl/defined").delete(), true);
    assert.equal(await client.rateLimit("rl/defined").delete(), false);
    await assert.rejects(client.rateLimit("rl/defined").describe(), (e: unknown) => e instanceof LimitNotFound);
  });

  test("a token lease gives back what it did not spend", { timeout: 30_000 }, async () => {
    // 5 a minute: no token refills within the test, so counts are exact.
    const limit = client.rateLimit("rl/lease", { rate: 5, perMs: 60_000, burst: 5 });
    assert.equal(await limit.define(), true);
    assert.equal((await limit.describe()).available, 5);
    const block = await limit.reserve(4, 5_000);
    assert.ok(block instanceof TokenLease);
    assert.ok(block.reserved === 4 && block.left === 4 && block.valid && block.id > 0n);
    let info = await limit.describe();
    assert.equal(info.available, 1);
    assert.equal(info.leases, 1);
    assert.ok(block.trySpend());
    assert.equal(block.left, 3);
    assert.equal(await block.finish(), 3);
    assert.ok(!block.valid && !block.trySpend());
    assert.equal(await block.finish(), 0, "a second finish gives nothing back");
    info = await limit.describe();
    assert.deepEqual([info.available, info.leases, info.admitted], [4, 0, 1]);
    // More than is available now: refused.
    assert.equal(await limit.reserve(5, 5_000), null);

    // A lease spends nothing past its validity less the safety margin.
    const short = await limit.reserve(1, 300);
    assert.ok(short !== null);
    assert.ok(short.validUntil <= performance.now() + 300 - safetyMargin(300));
    await sleep(Math.max(0, short.validUntil - performance.now()) + 10);
    assert.ok(!short.valid && !short.trySpend() && short.left === 1);
    assert.equal(await short.finish(), 1);

    // Closing the client gives back the leases it has not finished.
    const other = await Client.connect(cluster.endpoints);
    const kept = await other.rateLimit("rl/lease").reserve(2, 5_000);
    assert.ok(kept !== null && kept.trySpend());
    assert.equal((await limit.describe()).available, 2);
    await other.close();
    assert.ok(!kept.valid);
    info = await limit.describe();
    assert.deepEqual([info.available, info.leases], [3, 0]);
  });
});
