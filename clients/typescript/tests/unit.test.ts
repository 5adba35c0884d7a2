/**
 * What needs no cluster: the lease rule, the mapping of every reason to
 * its typed error, the JSON mapping of 64-bit integers, and a dead cluster
 * failing within the call's deadline.
 */

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Client,
  InvalidArgument,
  REASON_CODES,
  REASONS,
  RaftlockError,
  ServerError,
  SessionGone,
  SessionLost,
  Unavailable,
  errorFromBody,
  safetyMargin,
} from "../src";
import { grantFrom } from "../src/codec";
import { Lease } from "../src/lease";
import { freePort, within } from "./cluster";

test("the safety margin is a tenth of the TTL, at least 100 ms", () => {
  assert.equal(safetyMargin(10_000), 1_000);
  assert.equal(safetyMargin(1_000), 100);
  assert.equal(safetyMargin(500), 100);
});

test("every reason becomes a typed error, read by reason, never by message", () => {
  for (const reason of REASONS) {
    const e = errorFromBody({ code: "WHATEVER", reason, message: "a message nobody reads" }, 400);
    assert.ok(e instanceof RaftlockError);
    // A reason without a class of its own takes its code's; only a code
    // that names no kind of failure leaves it a ServerError.
    const families = ["UNAVAILABLE", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "PERMISSION_DENIED"];
    if (e instanceof ServerError) assert.ok(!families.includes(REASON_CODES[reason]), `${reason} became a catch-all ServerError`);
    assert.equal(e.reason, reason);
    assert.equal(e instanceof SessionGone, reason === "SESSION_NOT_FOUND", reason);
    assert.equal(e.retryable, ["NOT_LEADER", "NO_QUORUM", "STOPPING"].includes(reason), reason);
  }
  // The same code without raftlock's reason (a proxy, an unknown path) is
  // not taken for a verdict it does not carry.
  assert.ok(errorFromBody({ code: "NOT_FOUND", reason: "", message: "session 7 not found" }, 404) instanceof ServerError);
  assert.ok(errorFromBody({}, 502) instanceof Unavailable);
  assert.ok(errorFromBody({ code: "DEADLINE_EXCEEDED" }, 504) instanceof Unavailable);
  const hinted = errorFromBody({ code: "UNAVAILABLE", reason: "NOT_LEADER", leader: "10.0.0.2:7000" }, 503);
  assert.equal(hinted.leader, "10.0.0.2:7000");
});

test("a lease past its deadline is lost for good, even if a late acknowledgement arrives", async () => {
  const late = new Lease(7n, 1_000, performance.now() - 1_000);
  assert.equal(late.valid, false);
  late.acknowledged(performance.now());
  assert.equal(late.valid, false, "a late acknowledgement revives nothing");
  assert.ok((await late.lost) instanceof SessionLost);

  const sent = performance.now();
  const fresh = new Lease(8n, 1_000, sent);
  assert.ok(fresh.valid);
  const near = (a: number, b: number): boolean => Math.abs(a - b) < 1e-6;
  assert.ok(near(fresh.validUntil, sent + 900));
  fresh.acknowledged(sent + 100);
  assert.ok(near(fresh.validUntil, sent + 1_000), "an acknowledgement moves the deadline to its send time + TTL - margin");
  fresh.acknowledged(sent + 50);
  assert.ok(near(fresh.validUntil, sent + 1_000), "never backwards");
  const reason = await within(fresh.lost, 3_000, "the lease's own timer ends it");
  assert.ok(reason instanceof SessionLost && !(reason instanceof SessionGone));
  assert.ok(performance.now() >= sent + 1_000);
});

test("tokens and session ids above 2^53 survive the JSON mapping", () => {
  const g = grantFrom({ token: "18446744073709551615", sessionId: "9007199254740993", name: "a", mode: "LOCK_MODE_SHARED", metadata: "aGk=" });
  assert.equal(g.token, 18446744073709551615n);
  assert.equal(g.sessionId, 9007199254740993n);
  assert.equal(g.mode, "shared");
  assert.equal(g.metadataText, "hi");
  assert.equal(grantFrom({}).token, 0n);
});

test("a dead cluster is Unavailable within the deadline; a bad endpoint is refused at once", async () => {
  const dead = `127.0.0.1:${await freePort()}`;
  const started = Date.now();
  await assert.rejects(Client.connect([dead], { deadlineMs: 1_000, attemptTimeoutMs: 300 }), (e: unknown) => e instanceof Unavailable && e.retryable);
  assert.ok(Date.now() - started < 3_000, `took ${Date.now() - started} ms`);
  await assert.rejects(Client.connect(["no-port-here"]), (e: unknown) => e instanceof InvalidArgument);
  await assert.rejects(Client.connect([]), (e: unknown) => e instanceof InvalidArgument);
});

test("fromEnv refuses what it cannot use, naming the variable", async () => {
  await assert.rejects(
    Client.fromEnv({ RAFTLOCK_CACERT: "/nonexistent/ca.pem" }),
    (e: unknown) => e instanceof InvalidArgument && /RAFTLOCK_CACERT=\/nonexistent\/ca\.pem/.test(e.message),
  );
  await assert.rejects(
    Client.fromEnv({ RAFTLOCK_CERT: "/nonexistent/client.pem" }),
    (e: unknown) => e instanceof InvalidArgument && /RAFTLOCK_CERT/.test(e.message),
  );
});
