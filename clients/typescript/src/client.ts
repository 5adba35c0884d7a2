/**
 * The handle users hold: the cluster connection, the sessions it keeps
 * alive, and the calls that need no session.
 * @packageDocumentation
 */

import { hostname } from "node:os";
import { readFileSync } from "node:fs";
import { Grant, GrantJson, LockMode, b64, grantFrom, newRequestId, num, toU64, u64, unb64 } from "./codec";
import { ClientClosed, InvalidArgument } from "./errors";
import { Observation } from "./election";
import { LeaseState, RateLimit, RateLimitOptions, giveBackQuietly } from "./ratelimit";
import { Session } from "./session";
import { ClientOptions, Cluster, ResolvedOptions } from "./transport";
import { now } from "./time";
import { Watch, WatchOptions } from "./watch";

/**
 * A queued acquisition, as `describe` shows it.
 *
 * @example
 * ```ts
 * const w: WaiterInfo = (await client.describe("a")).waiters[0];
 * ```
 */
export interface WaiterInfo {
  /** The waiting session. */
  readonly sessionId: bigint;
  /** Requested mode. */
  readonly mode: LockMode;
  /** The waiting acquisition's request id. */
  readonly requestId: Uint8Array;
  /** When it was queued (leader's wall clock, Unix ms). */
  readonly enqueuedAtMs: number;
  /** How long it is prepared to wait from then, ms. */
  readonly timeoutMs: number;
  /** Permits it asks for (1 unless a semaphore acquisition asked for more). */
  readonly count: number;
}

/**
 * Holders and waiters of one lock (a linearizable read).
 *
 * @example
 * ```ts
 * const info: LockInfo = await client.describe("payments/settle");
 * console.log(info.holders.map((h) => h.token), info.waiters.length);
 * ```
 */
export interface LockInfo {
  /** Lock name. */
  readonly name: string;
  /** Shared capacity; 0 when not fixed. */
  readonly permits: number;
  /** `permits` was set by {@link Client.resize} and holds whatever acquisitions state. */
  readonly resized: boolean;
  /** Non-zero while the lock is in lock-delay (its length, ms): nobody is granted it until the delay ends. */
  readonly lockDelayMs: number;
  /** Holders, in grant order. */
  readonly holders: Grant[];
  /** Waiters, in FIFO order. */
  readonly waiters: WaiterInfo[];
  /** The Raft log index the answer reflects. */
  readonly appliedIndex: bigint;
}

/**
 * One lock in a listing.
 *
 * @example
 * ```ts
 * for (const l of await client.list("jobs/")) console.log(l.name, l.waiters);
 * ```
 */
export interface LockSummary {
  /** Lock name. */
  readonly name: string;
  /** Holders, in grant order. */
  readonly holders: Grant[];
  /** Number of waiters. */
  readonly waiters: number;
  /** Non-zero while the lock is in lock-delay (its length, ms). */
  readonly lockDelayMs: number;
  /** The semaphore's size: the one `resize` set, else the holders' (0: not fixed). */
  readonly permits: number;
  /** `permits` was set by `resize`: such a semaphore is listed even when nobody holds it. */
  readonly resized: boolean;
}

/**
 * Whether a fencing token is current.
 *
 * @example
 * ```ts
 * const { valid, currentToken } = await client.validate("a", guard.token);
 * ```
 */
export interface Validation {
  /** True when a current holder holds this token. */
  readonly valid: boolean;
  /** Highest token among the current holders (0n when none). */
  readonly currentToken: bigint;
}

/**
 * A lock freed by force.
 *
 * @example
 * ```ts
 * const { released, granted } = await client.forceRelease("stuck/lock");
 * ```
 */
export interface ForceReleased {
  /** The grants taken away. */
  readonly released: Grant[];
  /** Waiters granted in their place, in FIFO order. */
  readonly granted: Grant[];
}

/**
 * A member's addresses.
 *
 * @example
 * ```ts
 * const m: Member = (await client.status()).members[0];
 * ```
 */
export interface Member {
  /** Node id. */
  readonly id: bigint;
  /** Raft address. */
  readonly peerAddr: string;
  /** Client (gRPC and HTTP) address. */
  readonly clientAddr: string;
}

/**
 * A node's view of the cluster. Counters are omitted; `raw` has every
 * field the server sent.
 *
 * @example
 * ```ts
 * const s: ClusterStatus = await client.status();
 * console.log(s.role, s.leaderAddr, s.members.length);
 * ```
 */
export interface ClusterStatus {
  /** The answering node's id. */
  readonly nodeId: bigint;
  /** Its Raft role: `leader`, `follower`, `candidate`, `learner`, `shutdown` or `unspecified`. */
  readonly role: string;
  /** Current Raft term. */
  readonly term: bigint;
  /** The leader it knows of (0n: none). */
  readonly leaderId: bigint;
  /** The leader's client address ("" when none). */
  readonly leaderAddr: string;
  /** Voting members. */
  readonly members: Member[];
  /** Non-voting learners. */
  readonly learners: Member[];
  /** Live sessions (with `linearizableCounts`). */
  readonly sessions: bigint;
  /** Locks held or waited for (with `linearizableCounts`). */
  readonly locks: bigint;
  /** The answer as JSON. */
  readonly raw: Readonly<Record<string, unknown>>;
}

/**
 * A live session as an operator sees it: who created it, from where, what
 * it holds and waits for, and how long it has left.
 *
 * @example
 * ```ts
 * for (const s of await client.sessions("billing-")) {
 *   console.log(`${s.sessionId} ${s.clientName} pid ${s.pid}@${s.host} holds ${s.held.join(", ")}`);
 * }
 * ```
 */
export interface SessionInfo {
  /** Session id. */
  readonly sessionId: bigint;
  /** The name the client gave itself. */
  readonly clientName: string;
  /** The authenticated identity that created it; empty without auth. */
  readonly identity: string;
  /** Host name the client reported; empty if it did not. */
  readonly host: string;
  /** Process id the client reported; 0 if it did not. */
  readonly pid: number;
  /** Creation time (leader's wall clock, Unix ms). */
  readonly createdAtMs: number;
  /** Time to live without keep-alives, ms. */
  readonly ttlMs: number;
  /** Time left before the leader expires it without a keep-alive, when the answer was made, ms. */
  readonly expiresInMs: number;
  /** Locks it holds, by name. */
  readonly held: string[];
  /** Locks it waits for, by name. */
  readonly waiting: string[];
}

interface SessionInfoJson {
  sessionId?: string;
  clientName?: string;
  identity?: string;
  host?: string;
  pid?: number;
  createdAtMs?: string;
  ttlMs?: string;
  expiresInMs?: string;
  held?: string[];
  waiting?: string[];
}

/**
 * How to create a session.
 *
 * @example
 * ```ts
 * const opts: SessionOptions = { ttlMs: 15_000, clientName: "billing-worker-3" };
 * ```
 */
export interface SessionOptions {
  /** Time to live without keep-alives, ms (default 10 000; the cluster allows 1 s to 10 min by default). */
  ttlMs?: number;
  /** Shown by `describe` and in server logs (default: the client's name). */
  clientName?: string;
}

interface MemberJson {
  id?: string;
  peerAddr?: string;
  clientAddr?: string;
}

function member(m: MemberJson): Member {
  return { id: u64(m.id), peerAddr: m.peerAddr ?? "", clientAddr: m.clientAddr ?? "" };
}

function resolve(o: ClientOptions): ResolvedOptions {
  const positive = (v: number | undefined, dflt: number, what: string): number => {
    if (v === undefined) return dflt;
    if (!(v > 0) || !Number.isFinite(v)) throw new InvalidArgument(`${what} must be a positive number of ms, got ${v}`, { code: "INVALID_ARGUMENT" });
    return v;
  };
  return {
    token: o.token,
    deadlineMs: positive(o.deadlineMs, 15_000, "deadlineMs"),
    attemptTimeoutMs: positive(o.attemptTimeoutMs, 6_000, "attemptTimeoutMs"),
    initialBackoffMs: positive(o.initialBackoffMs, 25, "initialBackoffMs"),
    maxBackoffMs: positive(o.maxBackoffMs, 800, "maxBackoffMs"),
    clientName: o.clientName ?? `node:${hostname()}:${process.pid}`,
    tls: o.tls,
    interceptors: o.interceptors ?? [],
    probeIntervalMs: positive(o.probeIntervalMs, 2_000, "probeIntervalMs"),
  };
}

/** The endpoints and options the CLI's environment variables give. */
function optionsFromEnv(env: Readonly<Record<string, string | undefined>>): { endpoints: string; fromEnv: ClientOptions } {
  const endpoints = env.RAFTLOCK_ENDPOINTS?.trim() || "127.0.0.1:7000";
  const read = (name: string): string | undefined => {
    const path = env[name]?.trim();
    if (!path) return undefined;
    try {
      return readFileSync(path, "utf8");
    } catch (e) {
      throw new InvalidArgument(`${name}=${path}: ${(e as Error).message}`, { code: "INVALID_ARGUMENT" });
    }
  };
  const ca = read("RAFTLOCK_CACERT");
  const cert = read("RAFTLOCK_CERT");
  const key = read("RAFTLOCK_KEY");
  if ((cert === undefined) !== (key === undefined)) {
    throw new InvalidArgument("RAFTLOCK_CERT and RAFTLOCK_KEY go together: set both or neither", { code: "INVALID_ARGUMENT" });
  }
  const fromEnv: ClientOptions = {};
  if (ca !== undefined || cert !== undefined || endpoints.includes("https://")) fromEnv.tls = { ca, cert, key };
  if (env.RAFTLOCK_AUTH_TOKEN) fromEnv.token = env.RAFTLOCK_AUTH_TOKEN;
  if (env.RAFTLOCK_CLIENT_NAME) fromEnv.clientName = env.RAFTLOCK_CLIENT_NAME;
  return { endpoints, fromEnv };
}

/**
 * A handle to a raftlock cluster. It finds the leader itself (following a
 * follower's `leader` hint), retries what carries no verdict (no leader, no
 * quorum, a broken connection) with jittered exponential backoff until the
 * call's deadline, and keeps its sessions alive. One client per process is
 * enough; every session and call shares its connections.
 *
 * @example
 * ```ts
 * import { Client } from "raftlock";
 * const client = await Client.connect(["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]);
 * const session = await client.session({ ttlMs: 10_000 });
 * const guard = await session.lock("payments/settle", { timeoutMs: 5_000 });
 * console.log("token", guard.token);
 * await guard.release();
 * await client.close();
 * ```
 */
export class Client {
  /** @internal */
  readonly cluster: Cluster;
  private readonly liveSessions = new Set<Session>();
  private readonly observations = new Set<Observation>();
  private readonly watches = new Set<Watch>();
  private readonly tokenLeases = new Set<LeaseState>();
  private closed = false;

  private constructor(endpoints: string[], options: ResolvedOptions) {
    this.cluster = new Cluster(endpoints, options);
  }

  /**
   * Connects to the cluster at `endpoints` (`host:port` client addresses,
   * a list or one comma-separated string) and finds its leader. Fails if
   * no node answers within the deadline, or if the credentials are refused.
   *
   * @example
   * ```ts
   * const client = await Client.connect(process.env.RAFTLOCK_ENDPOINTS ?? "127.0.0.1:7000", { token: process.env.RAFTLOCK_AUTH_TOKEN });
   * ```
   */
  static async connect(endpoints: string[] | string, options: ClientOptions = {}): Promise<Client> {
    const list = typeof endpoints === "string" ? endpoints.split(",") : endpoints;
    const client = new Client(list, resolve(options));
    try {
      await client.status();
    } catch (e) {
      client.cluster.close();
      throw e;
    }
    return client;
  }

  /**
   * Connects as the `raftlock` CLI would, from the same environment
   * variables: `RAFTLOCK_ENDPOINTS` (default `127.0.0.1:7000`; `host:port`
   * or `http(s)://host:port`, comma-separated), `RAFTLOCK_CACERT` (a PEM
   * file; turns TLS on, as an `https://` endpoint does with the system's
   * roots), `RAFTLOCK_CERT` and `RAFTLOCK_KEY` (this client's certificate
   * and key), `RAFTLOCK_AUTH_TOKEN` and `RAFTLOCK_CLIENT_NAME`. `options`
   * adds to or overrides what they say. A file that cannot be read is an
   * `InvalidArgument` naming its variable.
   *
   * @example
   * ```ts
   * const client = await Client.fromEnv();
   * const session = await client.session({ ttlMs: 10_000 });
   * ```
   */
  static async fromEnv(env: Readonly<Record<string, string | undefined>> = process.env, options: ClientOptions = {}): Promise<Client> {
    const { endpoints, fromEnv } = optionsFromEnv(env);
    return Client.connect(endpoints, { ...fromEnv, ...options });
  }

  /**
   * The options in force, defaults filled in.
   *
   * @example
   * ```ts
   * console.log(client.options.deadlineMs); // 15000
   * ```
   */
  get options(): Readonly<ResolvedOptions> {
    return this.cluster.options;
  }

  /**
   * Creates a session and keeps it alive every TTL/3 in the background
   * until it is closed, lost, or the client closes. A retried creation
   * reuses one creation key, so a lost answer never leaves a second,
   * orphaned session behind.
   *
   * @example
   * ```ts
   * const session = await client.session({ ttlMs: 15_000, clientName: "billing-worker-3" });
   * ```
   */
  async session(options: SessionOptions = {}): Promise<Session> {
    this.checkOpen();
    const ttlMs = options.ttlMs ?? 10_000;
    if (!Number.isInteger(ttlMs) || ttlMs <= 0) {
      throw new InvalidArgument(`ttlMs must be a positive whole number of ms, got ${ttlMs}`, { code: "INVALID_ARGUMENT", reason: "TTL_OUT_OF_RANGE" });
    }
    // One key for every attempt: a retry whose first attempt created the
    // session (and lost the answer) gets that session, not a second one.
    const creationKey = b64(newRequestId());
    // The first attempt's send time: the leader counts the lease from when
    // it applied the creation, which is no earlier.
    const sent = now();
    const r = await this.cluster.call<{ sessionId?: string; ttlMs?: string }>("/v1/session/create", () => ({
      body: {
        ttlMs: String(ttlMs),
        clientName: options.clientName ?? this.options.clientName,
        creationKey,
        // Shown to operators with the session's locks (describe, /ui).
        host: hostname().slice(0, 256),
        pid: process.pid,
      },
    }));
    const granted = num(r.ttlMs) || ttlMs;
    const s = new Session(this, this.cluster, u64(r.sessionId), granted, sent);
    if (this.closed) {
      s.abandon(new ClientClosed("the client is closed", { code: "CANCELLED" }));
    } else {
      this.liveSessions.add(s);
    }
    return s;
  }

  /**
   * This node's view of the cluster (any node answers). With
   * `linearizableCounts`, the leader also counts sessions and locks.
   *
   * @example
   * ```ts
   * const { leaderAddr, term } = await client.status();
   * ```
   */
  async status(options: { linearizableCounts?: boolean } = {}): Promise<ClusterStatus> {
    this.checkOpen();
    const raw = await this.cluster.call<Record<string, unknown>>(
      "/v1/cluster/status",
      () => ({ body: options.linearizableCounts ? { linearizableCounts: true } : {} }),
      { fromLeader: false },
    );
    const role = String(raw.role ?? "ROLE_UNSPECIFIED").replace(/^ROLE_/, "").toLowerCase();
    this.cluster.hint(typeof raw.leaderAddr === "string" ? raw.leaderAddr : undefined);
    return {
      nodeId: u64(raw.nodeId),
      role,
      term: u64(raw.term),
      leaderId: u64(raw.leaderId),
      leaderAddr: typeof raw.leaderAddr === "string" ? raw.leaderAddr : "",
      members: ((raw.members as MemberJson[] | undefined) ?? []).map(member),
      learners: ((raw.learners as MemberJson[] | undefined) ?? []).map(member),
      sessions: u64(raw.sessions),
      locks: u64(raw.locks),
      raw,
    };
  }

  /**
   * Holders (with tokens) and waiters (in FIFO order) of lock `name`.
   *
   * @example
   * ```ts
   * const info = await client.describe("payments/settle");
   * console.log(info.holders[0]?.metadataText);
   * ```
   */
  async describe(name: string): Promise<LockInfo> {
    this.checkOpen();
    type WaiterJson = { sessionId?: string; mode?: string; requestId?: string; enqueuedAtMs?: string; timeoutMs?: string; count?: number };
    const r = await this.cluster.call<{
      name?: string;
      permits?: number;
      holders?: GrantJson[];
      waiters?: WaiterJson[];
      appliedIndex?: string;
      lockDelayMs?: string;
      resized?: boolean;
    }>(
      "/v1/lock/describe",
      () => ({ body: { name } }),
    );
    return {
      name: r.name ?? name,
      permits: num(r.permits),
      resized: r.resized === true,
      lockDelayMs: num(r.lockDelayMs),
      holders: (r.holders ?? []).map(grantFrom),
      waiters: (r.waiters ?? []).map((w) => ({
        sessionId: u64(w.sessionId),
        mode: w.mode === "LOCK_MODE_SHARED" ? "shared" : "exclusive",
        requestId: unb64(w.requestId),
        enqueuedAtMs: num(w.enqueuedAtMs),
        timeoutMs: num(w.timeoutMs),
        count: Math.max(num(w.count), 1),
      })),
      appliedIndex: u64(r.appliedIndex),
    };
  }

  /**
   * Every lock whose name starts with `prefix` that is held or waited
   * for, and every semaphore whose size `resize` set, held or not, in name
   * order (all pages; names the caller may not read are left out by the
   * server).
   *
   * @example
   * ```ts
   * const busy = await client.list("jobs/");
   * ```
   */
  async list(prefix = ""): Promise<LockSummary[]> {
    this.checkOpen();
    const out: LockSummary[] = [];
    let pageToken = "";
    for (;;) {
      const token = pageToken;
      const r = await this.cluster.call<{ locks?: { name?: string; holders?: GrantJson[]; waiters?: number; lockDelayMs?: string; permits?: number; resized?: boolean }[]; nextPageToken?: string }>(
        "/v1/lock/list",
        () => ({ body: { prefix, pageToken: token, limit: 1000 } }),
      );
      for (const l of r.locks ?? []) {
        out.push({
          name: l.name ?? "",
          holders: (l.holders ?? []).map(grantFrom),
          waiters: num(l.waiters),
          lockDelayMs: num(l.lockDelayMs),
          permits: num(l.permits),
          resized: l.resized ?? false,
        });
      }
      if (!r.nextPageToken) return out;
      pageToken = r.nextPageToken;
    }
  }

  /**
   * Live sessions whose client names start with `clientNamePrefix`, in id
   * (creation) order, every page (a linearizable read on the leader): who
   * holds and waits for what, from where, and for how much longer. With
   * authentication on, an identity that may not read every lock sees only
   * its own sessions. `pageSize` (1 to 1 000, default 1 000) is how many
   * each call to the server returns.
   *
   * @example
   * ```ts
   * for (const s of await client.sessions("billing-")) {
   *   console.log(`${s.sessionId} ${s.clientName}: holds ${s.held.join(", ")}, ${s.expiresInMs} ms left`);
   * }
   * ```
   */
  async sessions(clientNamePrefix = "", options: { pageSize?: number } = {}): Promise<SessionInfo[]> {
    this.checkOpen();
    const limit = options.pageSize ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new InvalidArgument(`pageSize must be a whole number from 1 to 1000, got ${limit}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
    const out: SessionInfo[] = [];
    let pageToken = 0n;
    for (;;) {
      const token = pageToken;
      const r = await this.cluster.call<{ sessions?: SessionInfoJson[]; nextPageToken?: string }>("/v1/session/list", () => ({
        body: { clientNamePrefix, pageToken: String(token), limit },
      }));
      for (const s of r.sessions ?? []) {
        out.push({
          sessionId: u64(s.sessionId),
          clientName: s.clientName ?? "",
          identity: s.identity ?? "",
          host: s.host ?? "",
          pid: num(s.pid),
          createdAtMs: num(s.createdAtMs),
          ttlMs: num(s.ttlMs),
          expiresInMs: num(s.expiresInMs),
          held: s.held ?? [],
          waiting: s.waiting ?? [],
        });
      }
      pageToken = u64(r.nextPageToken);
      if (pageToken === 0n) return out;
    }
  }

  /**
   * Whether `token` belongs to a current holder of lock `name` (a
   * linearizable read; what a protected resource asks when it cannot keep
   * the highest token itself).
   *
   * @example
   * ```ts
   * if (!(await client.validate("a", token)).valid) throw new Error("stale writer");
   * ```
   */
  async validate(name: string, token: bigint | string | number): Promise<Validation> {
    this.checkOpen();
    const t = toU64(token, "token");
    const r = await this.cluster.call<{ valid?: boolean; currentToken?: string }>("/v1/lock/validate", () => ({
      body: { name, token: String(t) },
    }));
    return { valid: r.valid === true, currentToken: u64(r.currentToken) };
  }

  /**
   * Frees lock `name` whoever holds it (needs the `admin` right): the
   * holders lose it and the next waiters are granted in the same log entry,
   * with larger tokens. Not retried where it may already have run, since a
   * second run would free the next holder too.
   *
   * @example
   * ```ts
   * const { released } = await client.forceRelease("stuck/lock");
   * ```
   */
  async forceRelease(name: string): Promise<ForceReleased> {
    this.checkOpen();
    const r = await this.cluster.call<{ released?: GrantJson[]; granted?: GrantJson[] }>(
      "/v1/lock/force-release",
      () => ({ body: { name } }),
      { idempotent: false },
    );
    return { released: (r.released ?? []).map(grantFrom), granted: (r.granted ?? []).map(grantFrom) };
  }

  /**
   * Sets the size of semaphore `name` to `permits`, held or not: from then
   * on it has that many permits whatever size acquisitions state, until
   * resized again (0 forgets the size). Growing grants waiters at once
   * (resolves with their grants, in FIFO order); shrinking takes nothing
   * from holders, it grants nobody until they fit. A size below what a
   * queued acquisition asks for is refused (`PermitsMismatch`).
   * Needs the `lock` right on the name. A retry after a lost answer sets
   * the same size again (its answer may then name fewer waiters).
   *
   * @example
   * ```ts
   * const letIn = await client.resize("crawler-slots", 16);
   * console.log(`${letIn.length} waiter(s) let in`);
   * ```
   */
  async resize(name: string, permits: number): Promise<Grant[]> {
    this.checkOpen();
    if (!Number.isInteger(permits) || permits < 0 || permits > 0xffffffff) {
      throw new InvalidArgument(`permits must be a whole number, got ${permits}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
    const r = await this.cluster.call<{ granted?: GrantJson[] }>("/v1/lock/resize", () => ({ body: { name, permits } }));
    return (r.granted ?? []).map(grantFrom);
  }

  /**
   * The current leader of election `name` (a linearizable read), or `null`.
   *
   * @example
   * ```ts
   * const leader = await client.leader("scheduler");
   * console.log(leader?.metadataText ?? "no leader");
   * ```
   */
  async leader(name: string): Promise<Grant | null> {
    this.checkOpen();
    const r = await this.cluster.call<{ leader?: GrantJson }>("/v1/election/leader", () => ({ body: { name } }));
    return r.leader ? grantFrom(r.leader) : null;
  }

  /**
   * Watches election `name`: its leader now and at every change, through
   * failovers of the cluster (see {@link Observation}).
   *
   * @example
   * ```ts
   * for await (const leader of client.observe("scheduler")) {
   *   route(leader?.metadataText);
   * }
   * ```
   */
  observe(name: string): Observation {
    this.checkOpen();
    const o = new Observation(this.cluster, name, (x) => this.observations.delete(x));
    this.observations.add(o);
    return o;
  }

  /**
   * Watches the locks whose names start with `prefix`: every grant,
   * handoff, release, expiry and force-release from now on (or after
   * `afterIndex`), one batch per applied command, through reconnects and
   * failovers (see {@link Watch}). Nothing is sent until it is iterated.
   *
   * @example
   * ```ts
   * const stop = new AbortController();
   * for await (const batch of client.watch("deploy/", { signal: stop.signal })) {
   *   for (const e of batch.events) console.log(`${e.kind} ${e.name} by session ${e.sessionId} (token ${e.token})`);
   * }
   * ```
   */
  watch(prefix = "", options: WatchOptions = {}): Watch {
    this.checkOpen();
    const w = new Watch(this.cluster, prefix, options, (x) => this.watches.delete(x));
    if (!options.signal?.aborted) this.watches.add(w);
    return w;
  }

  /**
   * The rate limit `name`: `rate` tokens per `perMs` (default a second),
   * at most `burst` at once (default 1). With a rate, takes create the
   * limit with these parameters on first use (an existing limit with
   * others is refused with {@link LimitConflict}); without one it must
   * exist already ({@link LimitNotFound}). No call is made until it is used.
   *
   * @example
   * ```ts
   * const api = client.rateLimit("partner-api", { rate: 10, perMs: 1_000, burst: 10 });
   * if ((await api.take(1, { waitMs: 5_000 })).admitted) await callPartner();
   * ```
   */
  rateLimit(name: string, options: RateLimitOptions = {}): RateLimit {
    this.checkOpen();
    return new RateLimit(this, name, options);
  }

  /**
   * Closes every session of this client (releasing their locks at once),
   * gives back the unspent tokens of token leases not finished, ends
   * observations, and closes the connections. Sessions that cannot be
   * closed in time are left to expire.
   *
   * @example
   * ```ts
   * process.on("SIGTERM", () => void client.close().then(() => process.exit(0)));
   * ```
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const o of [...this.observations]) o.close();
    for (const w of [...this.watches]) w.close();
    const sessions = [...this.liveSessions];
    const deadlineMs = Math.min(this.options.deadlineMs, 5_000);
    await Promise.all([
      ...sessions.map((s) => s.close({ deadlineMs }).catch(() => undefined)),
      ...[...this.tokenLeases].map((l) => giveBackQuietly(l, deadlineMs)),
    ]);
    this.cluster.close();
  }

  /** @internal A token lease to give back if the client closes first. */
  trackLease(l: LeaseState): void {
    this.tokenLeases.add(l);
  }

  /** @internal A token lease given back. */
  untrackLease(l: LeaseState): void {
    this.tokenLeases.delete(l);
  }

  /** @internal A session stopped being kept alive. */
  forgetSession(s: Session): void {
    this.liveSessions.delete(s);
  }

  private checkOpen(): void {
    if (this.closed) throw new ClientClosed("the client is closed", { code: "CANCELLED" });
  }
}
