/**
 * A cluster with `--auth-file`: no token or an unknown one is
 * UNAUTHENTICATED, a known identity without the right on a name is
 * PERMISSION_DENIED (on calls and on observe streams), the right token
 * works, and an admin may force-release.
 */

import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Client, NotHolder, PermissionDenied, Unauthenticated } from "../src";
import { withCluster } from "./cluster";

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

test("bearer tokens: unauthenticated, permission denied, allowed", { timeout: 60_000 }, async () => {
  const teamA = `team-a-${randomUUID()}`;
  const root = `root-${randomUUID()}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "raftlock-ts-auth-"));
  const authFile = path.join(dir, "auth.toml");
  fs.writeFileSync(
    authFile,
    [
      "[roles.team-a]",
      'rules = [{ prefix = "team-a/", allow = ["read", "lock"] }]',
      "[roles.root]",
      'rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]',
      "[[identities]]",
      'name = "billing-worker"',
      `token_sha256 = "${sha256(teamA)}"`,
      'roles = ["team-a"]',
      "[[identities]]",
      'name = "ops"',
      `token_sha256 = "${sha256(root)}"`,
      'roles = ["root"]',
      "",
    ].join("\n"),
  );
  try {
    await withCluster(
      async (cluster) => {
        const fast = { deadlineMs: 5_000 };
        await assert.rejects(Client.connect(cluster.endpoints, fast), (e: unknown) => e instanceof Unauthenticated && e.reason === "UNAUTHENTICATED" && e.httpStatus === 401);
        await assert.rejects(Client.connect(cluster.endpoints, { ...fast, token: "not-a-token" }), (e: unknown) => e instanceof Unauthenticated && e.reason === "UNAUTHENTICATED");

        const a = await Client.connect(cluster.endpoints, { token: teamA });
        const ops = await Client.connect(cluster.endpoints, { token: root });
        try {
          const s = await a.session();
          await assert.rejects(s.lock("team-b/x", { timeoutMs: 1_000 }), (e: unknown) => e instanceof PermissionDenied && e.reason === "PERMISSION_DENIED" && e.httpStatus === 403);
          await assert.rejects(a.describe("team-b/x"), (e: unknown) => e instanceof PermissionDenied);
          // A refusal no retry can fix ends an observation with the error.
          const denied = a.observe("team-b/e");
          await assert.rejects(denied.next(), (e: unknown) => e instanceof PermissionDenied);
          const g = await s.lock("team-a/x", { timeoutMs: 5_000 });
          assert.ok((await a.validate("team-a/x", g.token)).valid);
          await assert.rejects(a.forceRelease("team-a/x"), (e: unknown) => e instanceof PermissionDenied, "force-release needs admin");
          const forced = await ops.forceRelease("team-a/x");
          assert.deepEqual(forced.released.map((r) => r.token), [g.token]);
          await assert.rejects(g.release(), (e: unknown) => e instanceof NotHolder, "a force-released lock is no longer the holder's");
          assert.ok(s.valid, "the session itself lives on");
        } finally {
          await a.close();
          await ops.close();
        }
      },
      { extra: ["--auth-file", authFile], token: root },
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
