/**
 * Replacing the PostgreSQL lock-table pattern with raftlock.
 *
 * The pattern:
 *
 * ```sql
 * CREATE TABLE locks (
 *   name       text PRIMARY KEY,
 *   holder_id  text NOT NULL,
 *   expires_at timestamptz NOT NULL,
 *   metadata   jsonb
 * );
 * -- acquire (or take over an expired row); no row back = busy, poll again
 * INSERT INTO locks VALUES ($1, $2, now() + interval '30 seconds', $3)
 * ON CONFLICT (name) DO UPDATE
 *   SET holder_id = EXCLUDED.holder_id, expires_at = EXCLUDED.expires_at, metadata = EXCLUDED.metadata
 *   WHERE locks.expires_at < now()
 * RETURNING holder_id;
 * -- renew, per lock, before expires_at
 * UPDATE locks SET expires_at = now() + interval '30 seconds' WHERE name = $1 AND holder_id = $2;
 * -- release
 * DELETE FROM locks WHERE name = $1 AND holder_id = $2;
 * ```
 *
 * How each part maps:
 *
 * | lock table                        | raftlock                                                    |
 * |-----------------------------------|-------------------------------------------------------------|
 * | `name`                            | the lock name                                               |
 * | `holder_id`                       | the session (`session.id`, plus its `clientName`)          |
 * | `expires_at`, renewed per lock    | the session's TTL, renewed by the library for all its locks |
 * | `metadata`                        | `lock(name, { metadata })`, shown by `client.describe`     |
 * | poll until the INSERT wins        | `lock(name, { timeoutMs })` waits in a FIFO queue           |
 * | `DELETE ... WHERE holder_id = $2` | `guard.release()`                                          |
 * | `SELECT * FROM locks`             | `client.describe(name)`, `client.list(prefix)`             |
 *
 * What the replacement adds:
 *
 * - Fencing tokens. A holder stalled past `expires_at` (GC pause, swap, a
 *   slow disk) still believes it holds the row and writes anyway; the table
 *   cannot stop it. Every raftlock grant carries a token that strictly
 *   increases per lock: the protected data keeps the highest token it has
 *   seen and refuses lower ones (below, `UPDATE ... WHERE fence <= $token`).
 * - The lost signal. With the table, the holder compares `expires_at` (the
 *   database's clock) with its own clock. Here the library counts the lease
 *   from the send time of its last acknowledged keep-alive, minus a margin,
 *   on a monotonic clock: `guard.valid` turns false and `guard.lost`
 *   resolves before the server can expire the session and grant the lock
 *   to anyone else.
 * - FIFO waiting without polling: waiters queue on the server and are
 *   granted in order, in the same log entry as the release.
 * - No single database to lose: the lock state is replicated by Raft over
 *   three or five nodes, and sessions survive a leader's failure.
 *
 * The demo below plays two workers against a fenced "jobs" table (kept in
 * memory here, with the SQL it stands for in comments).
 *
 * Run: RAFTLOCK_ENDPOINTS=127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002 node dist/examples/postgres-lock-table.js
 */

import { Client } from "../src";

/** `jobs(id, state, fence)`: the data the lock protects. */
class JobsTable {
  private readonly rows = new Map<string, { state: string; fence: bigint }>();

  /** `UPDATE jobs SET state = $2, fence = $3 WHERE id = $1 AND fence <= $3`
   * (with an INSERT for a new job): true when the row was written. */
  update(id: string, state: string, fence: bigint): boolean {
    const row = this.rows.get(id);
    if (row && row.fence > fence) return false;
    this.rows.set(id, { state, fence });
    return true;
  }

  get(id: string): string | undefined {
    return this.rows.get(id)?.state;
  }
}

async function main(): Promise<void> {
  const endpoints = process.env.RAFTLOCK_ENDPOINTS ?? "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002";
  const client = await Client.connect(endpoints);
  const jobs = new JobsTable();
  try {
    // holder_id + expires_at: one session per worker, renewed by the library.
    const a = await client.session({ ttlMs: 30_000, clientName: "worker-a" });
    const b = await client.session({ ttlMs: 30_000, clientName: "worker-b" });

    // INSERT ... ON CONFLICT ... WHERE expires_at < now(), with metadata.
    const ga = await a.lock("jobs/invoice-42", { timeoutMs: 10_000, metadata: JSON.stringify({ host: "a", pid: 1 }) });
    if (!jobs.update("invoice-42", "running on a", ga.token)) throw new Error("first write refused");

    // SELECT * FROM locks WHERE name = ...
    const info = await client.describe("jobs/invoice-42");
    console.log(`held by session ${info.holders[0]?.sessionId} (${info.holders[0]?.metadataText}), token ${info.holders[0]?.token}`);

    // Worker b waits in line instead of polling the table.
    const waiting = b.lock("jobs/invoice-42", { timeoutMs: 10_000, metadata: JSON.stringify({ host: "b", pid: 2 }) });

    // Worker a stalls; its lock passes on (here by release, in real life by
    // its session expiring while it is paused).
    await ga.release();
    const gb = await waiting;
    if (!jobs.update("invoice-42", "running on b", gb.token)) throw new Error("b's write refused");

    // a wakes up and writes with its old token: the fence refuses it.
    const late = jobs.update("invoice-42", "finished by a (stale)", ga.token);
    console.log(`stale write from a ${late ? "ACCEPTED" : "refused"}; job is "${jobs.get("invoice-42")}"`);
    if (late || gb.token <= ga.token) throw new Error("fencing did not hold");

    // DELETE FROM locks WHERE name = $1 AND holder_id = $2
    await gb.release();
  } finally {
    await client.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
