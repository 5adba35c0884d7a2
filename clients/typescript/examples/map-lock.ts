/**
 * Replacing an in-process lock (a `Map` of promise chains) with raftlock.
 *
 * The in-process lock below serializes the async tasks of ONE process. Run
 * two copies of the service, or restart one mid-task, and it protects
 * nothing. `ClusterLocks` keeps the same `run(name, fn)` shape and adds:
 *
 * - exclusion across processes and hosts, surviving the failover of a
 *   raftlock node (the lock lives in a Raft-replicated state machine);
 * - a fencing token for `fn` to hand to what it writes, so that a holder
 *   paused past its lease (GC, SIGSTOP, a VM migration) has its late writes
 *   refused instead of overwriting its successor's;
 * - the lost signal: `guard.valid` turns false, and `guard.lost` resolves,
 *   before anyone else can be granted the lock;
 * - FIFO order among waiters of every process, kept by the server (no
 *   polling).
 *
 * One session holds a lock once, so tasks of this process still queue
 * locally (the same Map as before) and only the head of each local queue
 * waits on the server.
 *
 * Run: RAFTLOCK_ENDPOINTS=127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002 node dist/examples/map-lock.js
 */

import { Client, LockGuard, Session, withLock } from "../src";

/** Before: correct inside one process only. */
class LocalLocks {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(name) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((r) => (done = r));
    const tail = before.then(() => mine);
    this.tails.set(name, tail);
    await before;
    try {
      return await fn();
    } finally {
      done();
      if (this.tails.get(name) === tail) this.tails.delete(name);
    }
  }
}

/** After: the same shape, across every process that uses the cluster. */
class ClusterLocks {
  private readonly local = new LocalLocks();

  constructor(private readonly session: Session) {}

  run<T>(name: string, fn: (guard: LockGuard) => Promise<T>, timeoutMs = 30_000): Promise<T> {
    return this.local.run(name, () => withLock(this.session, name, fn, { timeoutMs }));
  }
}

/** A resource that keeps the highest token it has seen and refuses lower
 * ones: what a fencing token asks of the thing it protects. */
class FencedCounter {
  value = 0;
  private highest = 0n;

  add(n: number, token: bigint): void {
    if (token < this.highest) throw new Error(`stale token ${token} < ${this.highest}`);
    this.highest = token;
    this.value += n;
  }
}

async function main(): Promise<void> {
  const endpoints = process.env.RAFTLOCK_ENDPOINTS ?? "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002";
  const client = await Client.connect(endpoints);
  try {
    const locks = new ClusterLocks(await client.session({ ttlMs: 10_000 }));
    const counter = new FencedCounter();
    // Ten concurrent read-modify-write tasks; without the lock they would
    // interleave between the read and the write.
    await Promise.all(
      Array.from({ length: 10 }, () =>
        locks.run("examples/counter", async (guard) => {
          const seen = counter.value;
          await new Promise((r) => setTimeout(r, 5));
          if (!guard.valid) throw new Error("lost the lock: not writing");
          counter.add(seen + 1 - counter.value, guard.token);
        }),
      ),
    );
    console.log(`counter = ${counter.value}`);
    if (counter.value !== 10) throw new Error(`expected 10, got ${counter.value}`);
  } finally {
    await client.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
