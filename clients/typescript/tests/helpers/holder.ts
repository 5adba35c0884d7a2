/**
 * A separate client process for the tests: `mutex:N` takes a lock N times
 * and records each hold's wall-clock span; `hold` holds a lock and records,
 * every 20 ms, whether the library says it is still valid and until when,
 * so the test can pause it (SIGSTOP) past its TTL or kill it; `hold:MS`
 * holds it with a lock-delay of MS.
 *
 * node holder.js ENDPOINTS NAME TTL_MS MODE OUT_FILE
 */

import * as fs from "node:fs";
import { Client } from "../../src";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const [endpoints, name, ttl, mode, out] = process.argv.slice(2) as [string, string, string, string, string];
  const log = (line: string): void => fs.appendFileSync(out, line + "\n");
  const client = await Client.connect(endpoints);
  const session = await client.session({ ttlMs: Number(ttl) });
  if (mode === "hold" || mode.startsWith("hold:")) {
    const lockDelayMs = Number(mode.split(":")[1] ?? 0);
    const guard = await session.lock(name, { timeoutMs: 30_000, lockDelayMs });
    void guard.lost.then((reason) => log(`on_lost ${Date.now()} ${reason.constructor.name}`));
    log(`held ${guard.token} ${Date.now()}`);
    for (;;) {
      const valid = guard.valid;
      // The library's deadline, moved onto the wall clock the test shares.
      const deadline = Date.now() + (guard.validUntil - performance.now());
      log(`tick ${Date.now()} ${valid ? 1 : 0} ${deadline}`);
      if (!valid) {
        await Promise.race([guard.lost, sleep(5_000)]);
        log(`lost ${Date.now()}`);
        break;
      }
      await sleep(20);
    }
  } else {
    const times = Number(mode.split(":")[1]);
    for (let i = 0; i < times; i++) {
      const guard = await session.lock(name, { timeoutMs: 30_000 });
      const start = Date.now();
      await sleep(10);
      if (!guard.valid) throw new Error("lost the lock while holding it");
      log(`hold ${guard.token} ${start} ${Date.now()}`);
      await guard.release();
    }
  }
  await client.close();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
