/**
 * TLS on the client port, against `raftlockd dev --tls --auth` (its own CA,
 * node certificates, a root identity with a token and a client
 * certificate): the CA and a bearer token work, a client certificate alone
 * works, and no credentials is UNAUTHENTICATED even over TLS.
 */

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { Client, Unauthenticated } from "../src";
import { exited, raftlockd, track, within } from "./cluster";

test("TLS with a private CA, a bearer token or a client certificate", { timeout: 90_000 }, async () => {
  const dev = track(spawn(raftlockd(), ["dev", "--tls", "--auth"], { stdio: ["ignore", "pipe", "pipe"] }));
  try {
    const found: Record<string, string> = {};
    let output = "";
    await within(
      new Promise<void>((resolve, reject) => {
        dev.stdout!.setEncoding("utf8");
        dev.stdout!.on("data", (chunk: string) => {
          output += chunk;
          for (const line of output.split("\n")) {
            const kv = /^(RAFTLOCK_ENDPOINTS|RAFTLOCK_CACERT|RAFTLOCK_AUTH_TOKEN)=(\S+)/.exec(line);
            if (kv) found[kv[1]!] = kv[2]!;
            const cert = /--cert (\S+) --key (\S+)/.exec(line);
            if (cert) [found.cert, found.key] = [cert[1]!, cert[2]!];
            if (line.includes("nodes up")) resolve();
          }
        });
        dev.stderr!.on("data", () => undefined);
        dev.once("exit", (code: number | null) => reject(new Error(`raftlockd dev exited (${code}): ${output}`)));
      }),
      60_000,
      "raftlockd dev --tls --auth is up",
    );
    assert.equal(Object.keys(found).length, 5, `raftlockd dev printed ${JSON.stringify(found)}`);
    const endpoints = found.RAFTLOCK_ENDPOINTS!;
    const ca = fs.readFileSync(found.RAFTLOCK_CACERT!, "utf8");

    const byToken = await Client.connect(endpoints, { tls: { ca }, token: found.RAFTLOCK_AUTH_TOKEN });
    try {
      const s = await byToken.session({ ttlMs: 5_000 });
      const g = await s.lock("team-a/job", { timeoutMs: 5_000 });
      assert.ok((await byToken.validate("team-a/job", g.token)).valid);
      await g.release();
    } finally {
      await byToken.close();
    }

    const byCert = await Client.connect(endpoints, {
      tls: { ca, cert: fs.readFileSync(found.cert!, "utf8"), key: fs.readFileSync(found.key!, "utf8") },
    });
    try {
      const s = await byCert.session({ ttlMs: 5_000 });
      assert.ok(s.valid);
    } finally {
      await byCert.close();
    }

    // The variables `raftlockd dev` printed, read as the CLI reads them.
    const fromEnv = await Client.fromEnv({
      RAFTLOCK_ENDPOINTS: endpoints,
      RAFTLOCK_CACERT: found.RAFTLOCK_CACERT,
      RAFTLOCK_AUTH_TOKEN: found.RAFTLOCK_AUTH_TOKEN,
      RAFTLOCK_CLIENT_NAME: "from-env-test",
    });
    try {
      assert.equal(fromEnv.options.clientName, "from-env-test");
      const s = await fromEnv.session({ ttlMs: 5_000 });
      const g = await s.lock("team-a/from-env", { timeoutMs: 5_000 });
      assert.ok((await fromEnv.validate("team-a/from-env", g.token)).valid);
      await g.release();
    } finally {
      await fromEnv.close();
    }
    await assert.rejects(
      Client.fromEnv({ RAFTLOCK_ENDPOINTS: endpoints, RAFTLOCK_CACERT: found.RAFTLOCK_CACERT }, { deadlineMs: 5_000 }),
      (e: unknown) => e instanceof Unauthenticated,
    );

    await assert.rejects(Client.connect(endpoints, { tls: { ca }, deadlineMs: 5_000 }), (e: unknown) => e instanceof Unauthenticated);
  } finally {
    // Ctrl-C: the dev launcher stops its nodes and deletes their data.
    dev.kill("SIGINT");
    try {
      await exited(dev, 20_000);
    } catch {
      dev.kill("SIGKILL");
    }
  }
});
