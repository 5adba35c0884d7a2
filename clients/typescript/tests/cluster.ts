/**
 * A real raftlockd cluster for a test (no mocks of the server): three
 * processes on free loopback ports in a temporary directory, killed by PID
 * when the test ends (and, should the test process die first, on its exit).
 * The binary is $RAFTLOCKD, else the workspace's target/debug/raftlockd.
 */

import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** The repository's root (this file runs from clients/typescript/dist/tests). */
export const ROOT = path.resolve(__dirname, "..", "..", "..", "..");

export function raftlockd(): string {
  const p = process.env.RAFTLOCKD || path.join(ROOT, "target", "debug", "raftlockd");
  if (!fs.existsSync(p)) throw new Error(`${p} not found: run \`cargo build --bins\` first, or set RAFTLOCKD`);
  return p;
}

/** Every process the tests started and have not seen exit. */
const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

/** Spawns a process that is killed when the test process exits. */
export function track(p: ChildProcess): ChildProcess {
  live.add(p);
  p.once("exit", () => live.delete(p));
  return p;
}

/** Waits for a process to exit; resolves with its exit code (null if signalled). */
export function exited(p: ChildProcess, withinMs = 60_000): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`process ${p.pid} still running after ${withinMs} ms`)), withinMs);
    p.once("exit", (code: number | null) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const a = srv.address();
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  if (a === null || typeof a === "string") throw new Error("no port");
  return a.port;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface StatusJson {
  nodeId?: string;
  role?: string;
  leaderId?: string;
}

/** One node's status over HTTP, or undefined when it does not answer. */
function status(addr: string, token?: string): Promise<StatusJson | undefined> {
  const [host, port] = addr.split(":");
  return new Promise((resolve) => {
    const headers: Record<string, string> = { "content-type": "application/json", "content-length": "2" };
    if (token) headers.authorization = `Bearer ${token}`;
    const req = http.request({ host, port: Number(port), method: "POST", path: "/v1/cluster/status", headers });
    const t = setTimeout(() => {
      req.destroy();
      resolve(undefined);
    }, 500);
    req.on("error", () => {
      clearTimeout(t);
      resolve(undefined);
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(t);
        try {
          resolve(res.statusCode === 200 ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as StatusJson) : undefined);
        } catch {
          resolve(undefined);
        }
      });
    });
    req.end("{}");
  });
}

export interface ClusterOptions {
  n?: number;
  /** Extra raftlockd flags. */
  extra?: string[];
  /** Bearer token for the fixture's own status calls (clusters with auth). */
  token?: string;
}

export class TestCluster {
  readonly dir: string;
  readonly clientAddrs: string[] = [];
  readonly peerAddrs: string[] = [];
  readonly procs = new Map<number, ChildProcess>();
  private initial = "";

  private constructor(private readonly o: ClusterOptions) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "raftlock-ts-"));
  }

  static async start(o: ClusterOptions = {}): Promise<TestCluster> {
    const c = new TestCluster(o);
    try {
      const n = o.n ?? 3;
      for (let i = 0; i < n; i++) {
        c.clientAddrs.push(`127.0.0.1:${await freePort()}`);
        c.peerAddrs.push(`127.0.0.1:${await freePort()}`);
      }
      c.initial = c.peerAddrs.map((p, i) => `${i + 1}=${p}/${c.clientAddrs[i]}`).join(",");
      for (let i = 1; i <= n; i++) c.startNode(i);
      await c.waitForLeader();
      return c;
    } catch (e) {
      await c.close();
      throw e;
    }
  }

  get endpoints(): string[] {
    return [...this.clientAddrs];
  }

  startNode(node: number): void {
    const log = fs.openSync(path.join(this.dir, `n${node}.log`), "a");
    const p = spawn(
      raftlockd(),
      [
        "--id", String(node),
        "--data-dir", path.join(this.dir, `n${node}`),
        "--listen-client", this.clientAddrs[node - 1]!,
        "--listen-peer", this.peerAddrs[node - 1]!,
        "--initial-cluster", this.initial,
        ...(this.o.extra ?? []),
      ],
      { stdio: ["ignore", log, log] },
    );
    fs.closeSync(log);
    this.procs.set(node, track(p));
  }

  /** SIGKILLs node `node` and waits until it is gone. */
  async kill(node: number): Promise<void> {
    const p = this.procs.get(node);
    if (!p) return;
    this.procs.delete(node);
    p.kill("SIGKILL");
    await exited(p);
  }

  /** The node that says it leads, if any. */
  async leader(): Promise<number | undefined> {
    for (const node of this.procs.keys()) {
      const s = await status(this.clientAddrs[node - 1]!, this.o.token);
      if (s && s.role === "ROLE_LEADER" && s.leaderId === s.nodeId) return node;
    }
    return undefined;
  }

  async waitForLeader(withinMs = 30_000, otherThan?: number): Promise<number> {
    const stop = Date.now() + withinMs;
    while (Date.now() < stop) {
      const node = await this.leader();
      if (node !== undefined && node !== otherThan) return node;
      await sleep(100);
    }
    throw new Error(`no leader within ${withinMs} ms; logs:\n${this.logs()}`);
  }

  logs(): string {
    let out = "";
    for (let i = 1; i <= this.clientAddrs.length; i++) {
      const f = path.join(this.dir, `n${i}.log`);
      if (fs.existsSync(f)) out += `--- n${i}\n${fs.readFileSync(f, "utf8").split("\n").slice(-30).join("\n")}\n`;
    }
    return out;
  }

  async close(): Promise<void> {
    for (const node of [...this.procs.keys()]) await this.kill(node);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs `fn` against a fresh cluster, closed however `fn` ends. */
export async function withCluster(fn: (c: TestCluster) => Promise<void>, o: ClusterOptions = {}): Promise<void> {
  const c = await TestCluster.start(o);
  try {
    await fn(c);
  } finally {
    await c.close();
  }
}

/** Polls `check` every 20 ms until it holds, failing after `withinMs`. */
export async function eventually(what: string, check: () => Promise<boolean> | boolean, withinMs = 10_000): Promise<void> {
  const stop = Date.now() + withinMs;
  while (Date.now() < stop) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`not within ${withinMs} ms: ${what}`);
}

/** `p`, or a failure naming `what` if it takes longer than `ms` (the timer
 * is cleared either way, so it does not hold the test process open). */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
