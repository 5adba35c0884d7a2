/**
 * Rate limits: token buckets kept by the cluster, exact through leader
 * changes. Take tokens one request at a time, or reserve a block and spend
 * it locally ({@link TokenLease}), so that a hot limit costs one Raft write
 * per block.
 * @packageDocumentation
 */

import type { Client } from "./client";
import { num, u64 } from "./codec";
import { InvalidArgument } from "./errors";
import { safetyMargin } from "./lease";
import { now } from "./time";

/**
 * What a limit allows, to create it on first use: `rate` tokens per
 * `perMs`, at most `burst` at once.
 *
 * @example
 * ```ts
 * const opts: RateLimitOptions = { rate: 100, perMs: 1_000, burst: 20 };
 * ```
 */
export interface RateLimitOptions {
  /** Tokens per period (at least 1). Without it the limit must exist already. */
  rate?: number;
  /** The period, ms (1 to 86 400 000; default 1 000: a rate per second). */
  perMs?: number;
  /** Most tokens at once (default 1). */
  burst?: number;
}

/**
 * How long a {@link RateLimit.take} waits.
 *
 * @example
 * ```ts
 * const opts: TakeOptions = { waitMs: 2_000 };
 * ```
 */
export interface TakeOptions {
  /** Wait on the server up to this long, ms (at most the cluster's longest wait, an hour by default; longer is refused with `InvalidArgument`). */
  waitMs: number;
  /** Gives the wait up when aborted: the call rejects with the signal's reason and its connection is closed, which ends the wait on the server. */
  signal?: AbortSignal;
}

/**
 * The answer to a take.
 *
 * @example
 * ```ts
 * const a: Admission = await limit.tryTake();
 * if (!a.admitted) setTimeout(retry, a.retryAfterMs);
 * ```
 */
export interface Admission {
  /** The tokens were admitted. */
  readonly admitted: boolean;
  /** How many (0 when not admitted). */
  readonly n: number;
  /** Tokens that could be taken at once after this. */
  readonly remaining: number;
  /** When not admitted: after how long they would be, ms (rounded up). */
  readonly retryAfterMs: number;
}

/**
 * A rate limit now (a linearizable read).
 *
 * @example
 * ```ts
 * const info: LimitInfo = await limit.describe();
 * console.log(`${info.available} of ${info.burst} available`);
 * ```
 */
export interface LimitInfo {
  /** Limit name. */
  readonly name: string;
  /** Tokens per period. */
  readonly rate: number;
  /** The period, ms. */
  readonly perMs: number;
  /** Most tokens at once. */
  readonly burst: number;
  /** Whole tokens that could be taken at once now. */
  readonly available: number;
  /** Tokens admitted since it was defined (token leases count when taken, less what they gave back). */
  readonly admitted: number;
  /** Takes refused since it was defined. */
  readonly refused: number;
  /** Token leases outstanding. */
  readonly leases: number;
  /** The Raft log index the answer reflects. */
  readonly appliedIndex: bigint;
}

interface SpecJson {
  rate?: string;
  perMs?: string;
  burst?: string;
}

interface TakeJson {
  admitted?: boolean;
  n?: string;
  remaining?: string;
  retryAfterMs?: string;
  leaseId?: string;
}

/** @internal What a token lease shares with the client that closes it and
 * with the finalizer that gives it back when dropped: not the lease itself,
 * so that a dropped lease can be collected. */
export interface LeaseState {
  readonly limit: RateLimit;
  readonly id: bigint;
  readonly reserved: number;
  spent: number;
  finished: boolean;
}

/** The finalizer of dropped token leases (Node 14.6+; left out where the
 * runtime has none). Typed here: the package compiles against ES2020. */
interface Registry {
  register(target: object, held: LeaseState, token: object): void;
  unregister(token: object): void;
}
const FinalizationRegistryCtor = (globalThis as unknown as {
  FinalizationRegistry?: new (cleanup: (held: LeaseState) => void) => Registry;
}).FinalizationRegistry;
const dropped: Registry | undefined = FinalizationRegistryCtor
  ? new FinalizationRegistryCtor((state) => void giveBackQuietly(state))
  : undefined;

/** @internal Gives back a lease's unspent tokens once, ignoring failure
 * (unreturned tokens only ever admit less). */
export async function giveBackQuietly(state: LeaseState, deadlineMs?: number): Promise<void> {
  if (state.finished) return;
  state.finished = true;
  try {
    await state.limit.giveBack(state, deadlineMs);
  } catch {
    // Best effort.
  }
}

function wholeNumber(v: number, what: string, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) {
    throw new InvalidArgument(`${what} must be a whole number of at least ${min}, got ${v}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
  }
}

/**
 * A rate limit by name, and the parameters to create it with on first
 * use; from {@link Client.rateLimit}. Takes are not numbered: a take
 * retried after a lost answer may be counted twice, which only ever admits
 * less, never more than the limit.
 *
 * @example
 * ```ts
 * const emails = client.rateLimit("outbound-email", { rate: 100, perMs: 1_000, burst: 20 });
 * if ((await emails.tryTake()).admitted) await sendOne();
 * ```
 */
export class RateLimit {
  private readonly spec: { rate: string; perMs: string; burst: string } | undefined;

  /** @internal Use {@link Client.rateLimit}. */
  constructor(
    /** The client this limit is used through. */
    readonly client: Client,
    /** The limit's name. */
    readonly name: string,
    options: RateLimitOptions = {},
  ) {
    const { rate, perMs, burst } = options;
    if (rate === undefined) {
      if (perMs !== undefined || burst !== undefined) {
        throw new InvalidArgument("give a rate with perMs or burst", { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
      }
      return;
    }
    wholeNumber(rate, "rate", 1);
    wholeNumber(perMs ?? 1_000, "perMs", 1);
    wholeNumber(burst ?? 1, "burst", 1);
    this.spec = { rate: String(rate), perMs: String(perMs ?? 1_000), burst: String(burst ?? 1) };
  }

  private async call(n: number, waitMs: number | null, leaseMs: number, signal?: AbortSignal): Promise<TakeJson> {
    wholeNumber(n, "n", 1);
    if (waitMs !== null && !(waitMs >= 0 && Number.isFinite(waitMs))) {
      throw new InvalidArgument(`waitMs must be at least 0, got ${waitMs}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
    const cluster = this.client.cluster;
    const started = now();
    return cluster.call<TakeJson>(
      "/v1/ratelimit/take",
      () => {
        // Each retry waits only what is left, not the whole wait again.
        const left = waitMs === null ? null : Math.max(0, Math.floor(waitMs - (now() - started)));
        const body: Record<string, unknown> = { name: this.name, n: String(n) };
        if (this.spec) body.limit = this.spec;
        if (left !== null) body.waitTimeoutMs = String(left);
        if (leaseMs > 0) body.leaseMs = String(leaseMs);
        return { body, timeoutMs: cluster.options.attemptTimeoutMs + (left ?? 0) };
      },
      { deadlineMs: cluster.options.deadlineMs + (waitMs ?? 0), signal },
    );
  }

  /**
   * Takes `n` tokens now, or says after how long they would fit.
   *
   * @example
   * ```ts
   * const a = await limit.tryTake();
   * if (!a.admitted) console.log(`retry in ${a.retryAfterMs} ms`);
   * ```
   */
  async tryTake(n = 1): Promise<Admission> {
    return admission(await this.call(n, null, 0));
  }

  /**
   * Takes `n` tokens, waiting on the server up to `waitMs` for them (in
   * FIFO order with the other waiting takes of this limit). Not admitted
   * when they would not fit within the wait.
   *
   * @example
   * ```ts
   * if ((await limit.take(1, { waitMs: 2_000 })).admitted) await callTheApi();
   * ```
   */
  async take(n: number, options: TakeOptions): Promise<Admission> {
    return admission(await this.call(n, options.waitMs, 0, options.signal));
  }

  /**
   * Reserves a block of `n` tokens (at most the burst) to spend locally
   * within `validityMs` (at most 10 000): one Raft write for the whole
   * block. The cluster counts it as spent at once; call
   * {@link TokenLease.finish} (in a `finally`) to give back what is left.
   * Resolves with `null` when the block would not fit now.
   *
   * The block may be spent until the request's first send + `validityMs`
   * − {@link safetyMargin}(`validityMs`), the rule of session TTLs: the
   * cluster counts the lease from when it admitted the block, which is
   * later.
   *
   * @example
   * ```ts
   * const block = await limit.reserve(50, 1_000);
   * if (block) {
   *   try { while (block.trySpend()) await callTheApi(); } finally { await block.finish(); }
   * }
   * ```
   */
  async reserve(n: number, validityMs: number): Promise<TokenLease | null> {
    if (!(validityMs > 0) || !Number.isFinite(validityMs)) {
      throw new InvalidArgument(`validityMs must be a positive number of ms, got ${validityMs}`, { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
    const leaseMs = Math.max(1, Math.round(validityMs));
    const sent = now();
    const r = await this.call(n, null, leaseMs);
    if (r.admitted !== true) return null;
    return new TokenLease(this, u64(r.leaseId), num(r.n), sent + leaseMs - safetyMargin(leaseMs));
  }

  /**
   * Creates the limit with the parameters given, or checks an existing one
   * has them ({@link LimitConflict} otherwise); true if this call created
   * it.
   *
   * @example
   * ```ts
   * await client.rateLimit("partner-api", { rate: 10, burst: 10 }).define();
   * ```
   */
  async define(): Promise<boolean> {
    if (!this.spec) {
      throw new InvalidArgument("give a rate (and burst) to define a limit", { code: "INVALID_ARGUMENT", reason: "INVALID_ARGUMENT" });
    }
    const r = await this.client.cluster.call<{ created?: boolean }>("/v1/ratelimit/define", () => ({
      body: { name: this.name, limit: this.spec },
    }));
    return r.created === true;
  }

  /**
   * The limit's parameters, tokens available now and totals;
   * {@link LimitNotFound} if it does not exist.
   *
   * @example
   * ```ts
   * const { available, refused } = await limit.describe();
   * ```
   */
  async describe(): Promise<LimitInfo> {
    const r = await this.client.cluster.call<{
      name?: string;
      limit?: SpecJson;
      available?: string;
      admitted?: string;
      refused?: string;
      leases?: number;
      appliedIndex?: string;
    }>("/v1/ratelimit/describe", () => ({ body: { name: this.name } }));
    const spec = r.limit ?? {};
    return {
      name: r.name ?? this.name,
      rate: num(spec.rate),
      perMs: num(spec.perMs),
      burst: num(spec.burst),
      available: num(r.available),
      admitted: num(r.admitted),
      refused: num(r.refused),
      leases: num(r.leases),
      appliedIndex: u64(r.appliedIndex),
    };
  }

  /**
   * Forgets the limit (needs the `admin` right on the name); true if it
   * existed.
   *
   * @example
   * ```ts
   * await limit.delete();
   * ```
   */
  async delete(): Promise<boolean> {
    const r = await this.client.cluster.call<{ existed?: boolean }>("/v1/ratelimit/delete", () => ({ body: { name: this.name } }));
    return r.existed === true;
  }

  /** @internal Credits back a lease's unspent tokens; resolves with how
   * many the cluster credited (0: already given back, or too old). */
  async giveBack(state: LeaseState, deadlineMs?: number): Promise<number> {
    this.client.untrackLease(state);
    const unused = state.reserved - Math.min(state.spent, state.reserved);
    if (unused === 0) return 0;
    const r = await this.client.cluster.call<{ credited?: string }>(
      "/v1/ratelimit/return",
      () => ({ body: { name: this.name, leaseId: String(state.id), unused: String(unused) } }),
      deadlineMs === undefined ? {} : { deadlineMs },
    );
    return num(r.credited);
  }
}

function admission(r: TakeJson): Admission {
  return {
    admitted: r.admitted === true,
    n: num(r.n),
    remaining: num(r.remaining),
    retryAfterMs: num(r.retryAfterMs),
  };
}

/**
 * A block of tokens reserved with {@link RateLimit.reserve}, spent locally
 * until it runs out or its validity ends. {@link TokenLease.finish} gives
 * back what was not spent; a lease dropped without it, or still open when
 * the client closes, gives them back in the background, best effort.
 *
 * @example
 * ```ts
 * const block = await limit.reserve(20, 2_000);
 * if (block) {
 *   try {
 *     while (block.trySpend()) await fetchOne();
 *   } finally {
 *     await block.finish();
 *   }
 * }
 * ```
 */
export class TokenLease {
  private readonly state: LeaseState;

  /** @internal Use {@link RateLimit.reserve}. `until` is when spending
   * stops (`performance.now()` clock). */
  constructor(limit: RateLimit, id: bigint, reserved: number, private readonly until: number) {
    this.state = { limit, id, reserved, spent: 0, finished: false };
    limit.client.trackLease(this.state);
    dropped?.register(this, this.state, this.state);
  }

  /**
   * The lease's id on the cluster.
   *
   * @example
   * ```ts
   * console.log(`lease ${block.id}`);
   * ```
   */
  get id(): bigint {
    return this.state.id;
  }

  /**
   * Tokens the block holds.
   *
   * @example
   * ```ts
   * console.log(`${block.reserved} reserved, ${block.left} left`);
   * ```
   */
  get reserved(): number {
    return this.state.reserved;
  }

  /**
   * Spends one token if the block has one left and is still valid (no
   * call to the cluster).
   *
   * @example
   * ```ts
   * if (block.trySpend()) await callTheApi();
   * ```
   */
  trySpend(): boolean {
    if (!this.valid || this.state.spent >= this.state.reserved) return false;
    this.state.spent += 1;
    return true;
  }

  /**
   * Tokens not spent yet.
   *
   * @example
   * ```ts
   * console.log(`${block.left} left`);
   * ```
   */
  get left(): number {
    return this.state.reserved - this.state.spent;
  }

  /**
   * Whether tokens of the block may still be spent: not finished, and its
   * validity, less the safety margin, has not ended.
   *
   * @example
   * ```ts
   * while (block.valid && block.trySpend()) await callTheApi();
   * ```
   */
  get valid(): boolean {
    return !this.state.finished && now() < this.until;
  }

  /**
   * When the block stops being spendable (`performance.now()` clock).
   *
   * @example
   * ```ts
   * console.log(`${block.validUntil - performance.now()} ms left to spend`);
   * ```
   */
  get validUntil(): number {
    return this.until;
  }

  /**
   * Stops spending and gives back what is left; resolves with how many
   * tokens the cluster credited back (0 when nothing was left, or on a
   * second call).
   *
   * @example
   * ```ts
   * const back = await block.finish();
   * ```
   */
  async finish(): Promise<number> {
    if (this.state.finished) return 0;
    this.state.finished = true;
    dropped?.unregister(this.state);
    return this.state.limit.giveBack(this.state);
  }
}
