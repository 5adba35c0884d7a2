/**
 * The connection to a cluster: the endpoints, the leader last seen, one
 * keep-alive HTTP agent, and calls that follow the leader with jittered
 * exponential backoff until a deadline.
 *
 * Built on `node:http`/`node:https` rather than the global `fetch`: Node's
 * `fetch` gives up on an answer whose headers take more than 300 s (a
 * waiting acquire may take an hour) and cannot be handed a private CA or
 * a client certificate.
 * @packageDocumentation
 */

import * as http from "node:http";
import * as https from "node:https";
import { ErrorBody, RaftlockError, Unavailable, ClientClosed, errorFromBody, InvalidArgument } from "./errors";
import { jitter, now, sleep } from "./time";

/**
 * TLS to the nodes' client port: the CA that signed their certificates and,
 * for certificate authentication, this client's certificate and key (PEM).
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * const tls: TlsOptions = { ca: readFileSync("certs/ca.pem", "utf8") };
 * ```
 */
export interface TlsOptions {
  /** PEM of the CA to trust (default: the system's). */
  ca?: string | Uint8Array;
  /** PEM client certificate. */
  cert?: string | Uint8Array;
  /** PEM key of `cert`. */
  key?: string | Uint8Array;
  /** Check the nodes' certificates against this name, not each endpoint's host. */
  servername?: string;
}

/**
 * What an interceptor is told about one attempt of a call.
 *
 * @example
 * ```ts
 * const log: Interceptor = async (call, next) => { console.log(call.node, call.path); return next(); };
 * ```
 */
export interface CallInfo {
  /** `host:port` of the node tried. */
  readonly node: string;
  /** The API path (`/v1/lock/acquire`). */
  readonly path: string;
  /** The JSON body sent. */
  readonly body: Readonly<Record<string, unknown>>;
  /** 0 for the first attempt of a logical call, then 1, 2, ... */
  readonly attempt: number;
}

/**
 * Wraps every attempt of every unary call (tracing, metrics, fault
 * injection): call `next()` to send it, and return (or transform) its JSON
 * answer. An error thrown with `code` `UNAVAILABLE` counts as an attempt
 * without a verdict and is retried, like a broken connection.
 *
 * @example
 * ```ts
 * const timing: Interceptor = async (call, next) => {
 *   const t = Date.now();
 *   try { return await next(); } finally { console.log(call.path, Date.now() - t, "ms"); }
 * };
 * const client = await Client.connect(endpoints, { interceptors: [timing] });
 * ```
 */
export type Interceptor = (call: CallInfo, next: () => Promise<unknown>) => Promise<unknown>;

/**
 * Tuning for a {@link Client}; every field is optional.
 *
 * @example
 * ```ts
 * const client = await Client.connect(["10.0.0.1:7000"], { token: process.env.RAFTLOCK_AUTH_TOKEN, deadlineMs: 30_000 });
 * ```
 */
export interface ClientOptions {
  /** Bearer token sent with every call, for clusters with `--auth-file`. */
  token?: string;
  /** How long one logical call may take, retries included (default 15 000). */
  deadlineMs?: number;
  /** How long one attempt may take (default 6 000); a waiting acquire gets its wait on top. */
  attemptTimeoutMs?: number;
  /** First retry delay (default 25); doubles up to `maxBackoffMs`, with jitter. */
  initialBackoffMs?: number;
  /** Longest retry delay (default 800). */
  maxBackoffMs?: number;
  /** Shown in `describe` output and server logs (default `node:<host>:<pid>`). */
  clientName?: string;
  /** HTTPS to the nodes, with this CA / client certificate. */
  tls?: TlsOptions;
  /** Wrappers around every attempt of every unary call, outermost first. */
  interceptors?: Interceptor[];
  /**
   * How often a node serving a call that is still unanswered (a waiting
   * acquire, an observe stream, any call to a node in trouble) is checked
   * for life, and how long the check may take (default 2 000 ms). A frozen
   * or cut-off node never closes the connection; without the check such a
   * call would hang until its own timeout instead of moving to the new
   * leader.
   */
  probeIntervalMs?: number;
}

/** Options with every default filled in. */
export interface ResolvedOptions {
  token: string | undefined;
  deadlineMs: number;
  attemptTimeoutMs: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  clientName: string;
  tls: TlsOptions | undefined;
  interceptors: Interceptor[];
  probeIntervalMs: number;
}

/** One logical call's settings. */
export interface CallOptions {
  /** Retries stop after this long (default: the client's deadline). */
  deadlineMs?: number;
  /**
   * False for calls that must not run twice (force-release): retried only
   * when the node surely did not act on them (not the leader, connection
   * refused).
   */
  idempotent?: boolean;
  /** Take a success as proof the node leads (false for calls any node answers). */
  fromLeader?: boolean;
  /** Gives the call up when aborted: the attempt in flight is cut off and the call rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** What a call given up through its signal rejects with: the signal's reason, as `fetch` does. */
function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error("the call was aborted");
}

/** An attempt that failed below HTTP: no answer was read. */
function transportError(addr: string, e: unknown, sent: boolean): Unavailable {
  const detail = e instanceof Error ? e.message : String(e);
  const err = new Unavailable(`node ${addr}: ${detail}`, { code: "UNAVAILABLE", cause: e });
  NOT_SENT.set(err, !sent);
  return err;
}

/** How long a node that stopped answering is tried last. */
const SUSPECT_MS = 5_000;

/** Transport errors known to have reached no server. */
const NOT_SENT = new WeakMap<RaftlockError, boolean>();

/** Socket errors that mean the request never left this host. */
const UNSENT_CODES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EADDRNOTAVAIL"]);

/** Normalizes `http://host:port/` to `host:port`. */
export function normalize(endpoint: string): string {
  return endpoint
    .trim()
    .replace(/^https?:\/\//, "")
    .replace(/\/+$/, "");
}

function splitAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(":");
  const host = i > 0 ? addr.slice(0, i) : addr;
  const port = i > 0 ? Number(addr.slice(i + 1)) : NaN;
  if (!Number.isInteger(port) || port <= 0 || port > 65535 || host === "") {
    throw new InvalidArgument(`bad endpoint ${JSON.stringify(addr)}: expected host:port`, { code: "INVALID_ARGUMENT" });
  }
  return { host: host.replace(/^\[(.*)\]$/, "$1"), port };
}

/**
 * Whether a failed attempt should be tried again (elsewhere). Refusals that
 * carry a verdict are final; what carries none (no leader here, no quorum,
 * a broken connection, this client's own attempt timeout) is retried.
 */
export function retryable(e: RaftlockError): boolean {
  if (e.code === "UNAVAILABLE") return true;
  return e.reason === null && (e.code === "UNKNOWN" || e.code === "CANCELLED" || e.code === "DEADLINE_EXCEEDED");
}

/** The answer of a streaming call, with a way to hang up. */
export interface OpenStream {
  readonly res: AsyncIterable<Uint8Array | string>;
  cancel(): void;
}

/**
 * Checks the life of nodes with calls in flight: while any call to a node
 * is unanswered, the node's status is read every interval; a node that
 * does not answer in time has its calls cut, so they move on (retried with
 * the same request ids, waits keep their place) and is avoided for a
 * while. A call answered within the interval costs no check.
 */
class Watchdog {
  private readonly watched = new Map<string, Set<(e: RaftlockError) => void>>();
  private readonly timers = new Map<string, ReturnType<typeof setInterval>>();

  constructor(private readonly cluster: Cluster, private readonly intervalMs: number) {}

  add(addr: string, cut: (e: RaftlockError) => void): () => void {
    let set = this.watched.get(addr);
    if (!set) {
      set = new Set();
      this.watched.set(addr, set);
      const timer = setInterval(() => void this.probe(addr), this.intervalMs);
      // The calls watched keep the process alive, not their watchdog.
      timer.unref();
      this.timers.set(addr, timer);
    }
    set.add(cut);
    return () => {
      const s = this.watched.get(addr);
      if (!s) return;
      s.delete(cut);
      if (s.size === 0) this.stop(addr);
    };
  }

  private stop(addr: string): void {
    this.watched.delete(addr);
    const t = this.timers.get(addr);
    if (t !== undefined) clearInterval(t);
    this.timers.delete(addr);
  }

  private async probe(addr: string): Promise<void> {
    try {
      await this.cluster.send(addr, "/v1/cluster/status", {}, this.intervalMs, false);
    } catch (e) {
      // Only silence means trouble: a refusal (401, say) is an answer.
      if (e instanceof RaftlockError && e.httpStatus === undefined) {
        const cuts = [...(this.watched.get(addr) ?? [])];
        this.cluster.suspect(addr);
        for (const cut of cuts) cut(new Unavailable(`node ${addr} stopped answering`, { code: "UNAVAILABLE", cause: e }));
      }
    }
  }

  close(): void {
    for (const addr of [...this.timers.keys()]) this.stop(addr);
  }
}

/**
 * The nodes of one cluster as a client knows them. Internal: use
 * {@link Client}.
 */
export class Cluster {
  private readonly endpoints: string[];
  private leader: string | undefined;
  private next = 0;
  /** Nodes that stopped answering, and until when to try others first. */
  private readonly suspects = new Map<string, number>();
  private readonly agent: http.Agent;
  private readonly watchdog: Watchdog;
  private readonly requests = new Set<http.ClientRequest>();
  private closed = false;

  constructor(endpoints: string[], readonly options: ResolvedOptions) {
    this.endpoints = endpoints.map(normalize).filter((e) => e !== "");
    if (this.endpoints.length === 0) {
      throw new InvalidArgument("no endpoints given", { code: "INVALID_ARGUMENT" });
    }
    for (const e of this.endpoints) splitAddr(e);
    if (options.token !== undefined && !/^[\x21-\x7e]+$/.test(options.token)) {
      throw new InvalidArgument("the token must be printable ASCII without spaces", { code: "INVALID_ARGUMENT" });
    }
    const tls = options.tls;
    this.agent = tls
      ? new https.Agent({ keepAlive: true, ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.servername })
      : new http.Agent({ keepAlive: true });
    this.watchdog = new Watchdog(this, options.probeIntervalMs);
  }

  /** The node to try next: the leader last seen, else the endpoints in
   * turn, passing over nodes that recently stopped answering (a frozen node
   * costs a whole attempt timeout) unless every node did. */
  target(): string {
    if (this.leader !== undefined) return this.leader;
    const t = now();
    for (let i = 0; i < this.endpoints.length; i++) {
      const addr = this.endpoints[this.next % this.endpoints.length]!;
      this.next = (this.next + 1) % this.endpoints.length;
      if ((this.suspects.get(addr) ?? 0) <= t) return addr;
    }
    const addr = this.endpoints[this.next % this.endpoints.length]!;
    this.next = (this.next + 1) % this.endpoints.length;
    return addr;
  }

  /** `addr` did not answer: not the leader, and not the next to try. */
  suspect(addr: string): void {
    this.forget(addr);
    this.suspects.set(addr, now() + SUSPECT_MS);
  }

  /** Takes `addr` for the leader (it just served a leader-only call). */
  remember(addr: string): void {
    this.leader = addr;
    this.suspects.delete(addr);
  }

  /** Stops taking `addr` for the leader (it failed or timed out). */
  forget(addr: string): void {
    if (this.leader === addr) this.leader = undefined;
  }

  /** Learns the leader's address from a status answer. */
  hint(leaderAddr: string | undefined): void {
    if (leaderAddr) this.follow(normalize(leaderAddr));
  }

  private follow(addr: string): void {
    if (!this.endpoints.includes(addr)) this.endpoints.push(addr);
    this.leader = addr;
    this.suspects.delete(addr);
  }

  /** Learns from a failed attempt at `addr`: follows a leader hint (true),
   * or forgets `addr` as the leader. */
  learn(addr: string, e: RaftlockError): boolean {
    const hint = e.leader ? normalize(e.leader) : undefined;
    if (hint && hint !== addr) {
      this.follow(hint);
      return true;
    }
    if (e.httpStatus === undefined) this.suspect(addr);
    else this.forget(addr);
    return false;
  }

  /** Whether the client was closed. */
  get isClosed(): boolean {
    return this.closed;
  }

  private headers(body: string, accept: string): Record<string, string> {
    const h: Record<string, string> = {
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
      accept,
    };
    if (this.options.token !== undefined) h.authorization = `Bearer ${this.options.token}`;
    return h;
  }

  private request(addr: string, path: string, payload: string, accept: string): http.ClientRequest {
    const { host, port } = splitAddr(addr);
    const mod = this.options.tls ? https : http;
    const req = mod.request({
      host,
      port,
      method: "POST",
      path,
      agent: this.agent,
      headers: this.headers(payload, accept),
    });
    this.requests.add(req);
    req.on("close", () => this.requests.delete(req));
    return req;
  }

  /**
   * One attempt of a unary call at `addr`, without interceptors: the
   * parsed JSON answer, or a typed error (an `Unavailable` without
   * `httpStatus` when no answer was read).
   */
  send(addr: string, path: string, body: unknown, timeoutMs: number, watch = true, signal?: AbortSignal): Promise<unknown> {
    if (this.closed) return Promise.reject(new ClientClosed("the client is closed", { code: "CANCELLED" }));
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      let sent = false;
      let settled = false;
      let req: http.ClientRequest;
      try {
        req = this.request(addr, path, payload, "application/json");
      } catch (e) {
        reject(e);
        return;
      }
      const finish = (f: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unwatch();
        signal?.removeEventListener("abort", onAbort);
        f();
      };
      const fail = (e: unknown): void => {
        finish(() => reject(e));
        req.destroy();
      };
      // Closing the connection is what tells the server the caller left.
      const onAbort = (): void => fail(abortReason(signal as AbortSignal));
      signal?.addEventListener("abort", onAbort, { once: true });
      const timer = setTimeout(
        () => fail(new Unavailable(`node ${addr}: no answer to ${path} within ${Math.round(timeoutMs)} ms`, { code: "DEADLINE_EXCEEDED" })),
        timeoutMs,
      );
      const unwatch = watch ? this.watchdog.add(addr, fail) : () => undefined;
      req.on("socket", (socket) => {
        socket.setNoDelay(true);
        if (!socket.connecting) sent = true;
        else socket.once("connect", () => (sent = true));
      });
      req.on("error", (e) => fail(transportError(addr, e, sent && !UNSENT_CODES.has((e as { code?: string }).code ?? ""))));
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", (e) => fail(transportError(addr, e, true)));
        res.on("aborted", () => fail(transportError(addr, new Error("answer cut off"), true)));
        res.on("end", () =>
          finish(() => {
            const status = res.statusCode ?? 0;
            const textBody = Buffer.concat(chunks).toString("utf8");
            let json: unknown;
            try {
              json = textBody.trim() === "" ? {} : JSON.parse(textBody);
            } catch {
              json = undefined;
            }
            if (status >= 200 && status < 300 && json !== undefined) {
              resolve(json);
              return;
            }
            const errBody: ErrorBody = typeof json === "object" && json !== null ? (json as ErrorBody) : {};
            const headerLeader = res.headers["raftlock-leader"];
            if (!errBody.leader && typeof headerLeader === "string") errBody.leader = headerLeader;
            if (!errBody.message && textBody) errBody.message = `HTTP ${status}: ${textBody.slice(0, 200)}`;
            reject(errorFromBody(errBody, status));
          }),
        );
      });
      req.end(payload);
    });
  }

  /** One attempt through the interceptors. */
  attempt(addr: string, path: string, body: Record<string, unknown>, timeoutMs: number, attempt: number, signal?: AbortSignal): Promise<unknown> {
    const info: CallInfo = { node: addr, path, body, attempt };
    let next = (): Promise<unknown> => this.send(addr, path, body, timeoutMs, true, signal);
    for (const ic of [...this.options.interceptors].reverse()) {
      const inner = next;
      next = () => ic(info, inner);
    }
    return next();
  }

  /**
   * Runs one logical call, retrying on other nodes until it succeeds, is
   * refused for good, or the deadline passes. `make` builds each attempt's
   * body and timeout (a waiting acquire asks only what is left of its wait).
   */
  async call<T>(path: string, make: (attempt: number) => { body: Record<string, unknown>; timeoutMs?: number }, o: CallOptions = {}): Promise<T> {
    const deadlineMs = o.deadlineMs ?? this.options.deadlineMs;
    const giveUp = now() + deadlineMs;
    let backoff = this.options.initialBackoffMs;
    for (let attempt = 0; ; attempt++) {
      if (this.closed) throw new ClientClosed("the client is closed", { code: "CANCELLED" });
      const addr = this.target();
      if (o.signal?.aborted) throw abortReason(o.signal);
      const { body, timeoutMs } = make(attempt);
      try {
        const answer = await this.attempt(addr, path, body, timeoutMs ?? this.options.attemptTimeoutMs, attempt, o.signal);
        if (o.fromLeader !== false) this.remember(addr);
        return answer as T;
      } catch (raw) {
        if (o.signal?.aborted) throw abortReason(o.signal);
        const e = raw instanceof RaftlockError ? raw : new Unavailable(String(raw), { code: "UNKNOWN", cause: raw });
        const again = o.idempotent === false ? e.reason === "NOT_LEADER" || NOT_SENT.get(e) === true : retryable(e);
        if (!again) throw e;
        const hinted = this.learn(addr, e);
        const left = giveUp - now();
        if (left <= 0 || this.closed) {
          throw new Unavailable(`cluster unavailable: ${path} not served within ${deadlineMs} ms; last: ${e.message}`, {
            code: "UNAVAILABLE",
            reason: e.reason,
            leader: e.leader,
            cause: e,
          });
        }
        if (!hinted) {
          await sleep(Math.min(jitter(backoff), left));
          backoff = Math.min(backoff * 2, this.options.maxBackoffMs);
        }
      }
    }
  }

  /**
   * Opens a streaming call at `addr`: resolves once the answer's headers
   * say it streams, rejects with the typed refusal otherwise. The node is
   * watched while the stream is open; a dead node ends the stream with an
   * error. An aborted `signal` hangs up, and rejects an opening still on
   * its way with the signal's reason.
   */
  openStream(addr: string, path: string, body: unknown, signal?: AbortSignal): Promise<OpenStream> {
    if (this.closed) return Promise.reject(new ClientClosed("the client is closed", { code: "CANCELLED" }));
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      let req: http.ClientRequest;
      try {
        req = this.request(addr, path, payload, "application/x-ndjson");
      } catch (e) {
        reject(e);
        return;
      }
      let opened = false;
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${this.options.attemptTimeoutMs} ms`)), this.options.attemptTimeoutMs);
      const unwatch = this.watchdog.add(addr, (e) => req.destroy(e));
      const cancel = (): void => {
        clearTimeout(timer);
        unwatch();
        signal?.removeEventListener("abort", onAbort);
        req.destroy();
      };
      const onAbort = (): void => {
        cancel();
        if (!opened) reject(abortReason(signal as AbortSignal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => {
        cancel();
        if (!opened) reject(transportError(addr, e, true));
      });
      req.on("response", (res) => {
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          opened = true;
          // Strings, decoded across chunk boundaries (a character may be split).
          res.setEncoding("utf8");
          res.on("close", () => {
            unwatch();
            signal?.removeEventListener("abort", onAbort);
          });
          resolve({ res, cancel });
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          cancel();
          let errBody: ErrorBody = {};
          try {
            errBody = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ErrorBody;
          } catch {
            // A proxy's page: the status alone speaks.
          }
          const headerLeader = res.headers["raftlock-leader"];
          if (!errBody.leader && typeof headerLeader === "string") errBody.leader = headerLeader;
          reject(errorFromBody(errBody, status));
        });
      });
      req.end(payload);
    });
  }

  /** Stops everything in flight and the connections. */
  close(): void {
    this.closed = true;
    this.watchdog.close();
    for (const req of [...this.requests]) req.destroy();
    this.agent.destroy();
  }
}
