/**
 * A client process paused (SIGSTOP) past its session's TTL: another
 * session gets the lock only after the paused one's lease is over, the
 * paused library never claimed the lock valid past the moment the other
 * grant happened, and on SIGCONT it reports the lock lost (never valid
 * again).
 */

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Client } from "../src";
import { eventually, exited, track, withCluster } from "./cluster";

const HOLDER = path.join(__dirname, "helpers", "holder.js");

test("a paused holder loses its lock before anyone else gets it", { timeout: 90_000 }, () =>
  withCluster(async (cluster) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "raftlock-ts-pause-"));
    const out = path.join(dir, "holder");
    const read = (): string[][] => (fs.existsSync(out) ? fs.readFileSync(out, "utf8").trim().split("\n").map((l) => l.split(" ")) : []);
    const p = track(spawn(process.execPath, [HOLDER, cluster.endpoints.join(","), "pause/a", "2000", "hold", out], { stdio: "inherit" }));
    try {
      await eventually("the holder holds and ticks", () => read().some((l) => l[0] === "tick"), 20_000);
      p.kill("SIGSTOP");
      const pausedAt = Date.now();
      const client = await Client.connect(cluster.endpoints);
      let grantedAt: number;
      try {
        const s = await client.session({ ttlMs: 10_000 });
        const g = await s.lock("pause/a", { timeoutMs: 30_000 });
        grantedAt = Date.now();
        p.kill("SIGCONT");
        assert.equal(await exited(p, 30_000), 0, "the holder process failed");
        await g.release();
      } finally {
        await client.close();
      }
      const lines = read();
      const ticks = lines.filter((l) => l[0] === "tick").map(([, t, v, dl]) => ({ at: Number(t), valid: v === "1", deadline: Number(dl) }));
      const valid = ticks.filter((t) => t.valid);
      assert.ok(grantedAt > pausedAt + 1_000, "the lock went elsewhere only after the paused holder's TTL");
      assert.ok(valid.length > 0, "the holder saw its lock valid before the pause");
      const lastDeadline = valid[valid.length - 1]!.deadline;
      assert.ok(lastDeadline <= grantedAt, `the holder counted on the lock until ${lastDeadline}, after it was granted elsewhere at ${grantedAt}`);
      assert.ok(valid.every((t) => t.at < grantedAt), "a valid tick after the other grant");
      assert.equal(ticks[ticks.length - 1]!.valid, false, "after the pause the library must say the lock is lost");
      const fired = lines.filter((l) => l[0] === "on_lost");
      assert.ok(fired.length === 1 && fired[0]![2] === "SessionLost", `guard.lost must resolve with SessionLost: ${JSON.stringify(lines.slice(-3))}`);
    } finally {
      p.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }),
);
