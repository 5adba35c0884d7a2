/**
 * Leader election on top of locks: the leader is the exclusive holder of
 * the election's lock, its value the grant's metadata, its token the term
 * of office (fencing the leader's writes like any lock token).
 * @packageDocumentation
 */

import type { Session } from "./session";
import { Grant, GrantJson, b64, bytesOf, grantFrom, newRequestId, text } from "./codec";
import { NotHolder, RaftlockError, SessionGone, ServerError, WaitTimedOut, errorFromBody } from "./errors";
import { MAX_WAIT_MS, cancelWaitSoon, cancelsSettled } from "./lock";
import { Cluster, OpenStream, retryable } from "./transport";
import { Sleeper, jitter, now } from "./time";

/**
 * How to campaign.
 *
 * @example
 * ```ts
 * const opts: CampaignOptions = { timeoutMs: 10_000 };
 * ```
 */
export interface CampaignOptions {
  /** Give up with {@link WaitTimedOut} if not elected within this long (default: as long as the session lives). */
  timeoutMs?: number;
  /**
   * Gives the campaign up when aborted: the call rejects with the signal's
   * reason, the candidate leaves the queue at once, and a leadership that
   * raced the abort is given up, never left held.
   */
  signal?: AbortSignal;
}

/**
 * Leadership won by {@link Session.campaign}.
 *
 * @example
 * ```ts
 * const leadership = await session.campaign("scheduler", "host-7:8080");
 * leadership.lost.then(() => stopScheduling());
 * await leadership.proclaim("host-7:9090");
 * await leadership.resign();
 * ```
 */
export class Leadership {
  private resigned = false;
  private current: Uint8Array;

  /** @internal Created by {@link Session.campaign}. */
  constructor(
    /** The leader's session. */
    readonly session: Session,
    /** The leadership's grant. */
    readonly grant: Grant,
  ) {
    this.current = grant.metadata;
  }

  /**
   * The term-of-office token (strictly increasing per election): pass it
   * with writes so that a deposed leader's are refused.
   *
   * @example
   * ```ts
   * await store.put(key, value, { fence: leadership.token });
   * ```
   */
  get token(): bigint {
    return this.grant.token;
  }

  /**
   * The election's name.
   *
   * @example
   * ```ts
   * console.log(`leading ${leadership.name}`);
   * ```
   */
  get name(): string {
    return this.grant.name;
  }

  /**
   * The value this leader last published.
   *
   * @example
   * ```ts
   * console.log(new TextDecoder().decode(leadership.value));
   * ```
   */
  get value(): Uint8Array {
    return this.current;
  }

  /**
   * {@link Leadership.value} as UTF-8 text.
   *
   * @example
   * ```ts
   * console.log(leadership.valueText); // "host-7:8080"
   * ```
   */
  get valueText(): string {
    return text(this.current);
  }

  /**
   * Whether this client can still act as leader: not resigned, and the
   * session within its local validity deadline.
   *
   * @example
   * ```ts
   * while (leadership.valid) await scheduleOne(leadership.token);
   * ```
   */
  get valid(): boolean {
    return !this.resigned && this.session.valid;
  }

  /**
   * Until when (on the `performance.now()` clock) the leadership can be
   * claimed if no further keep-alive is acknowledged.
   *
   * @example
   * ```ts
   * const leftMs = leadership.validUntil - performance.now();
   * ```
   */
  get validUntil(): number {
    return this.session.validUntil;
  }

  /**
   * Resolves (never rejects) with the reason when the leadership can no
   * longer be claimed because the session was lost or ended.
   *
   * @example
   * ```ts
   * leadership.lost.then((r) => console.error("no longer leader:", r.message));
   * ```
   */
  get lost(): Promise<RaftlockError> {
    return this.session.lost;
  }

  /**
   * Publishes a new value for observers (at most 4 KiB; strings are UTF-8).
   *
   * @example
   * ```ts
   * await leadership.proclaim("host-7:9090");
   * ```
   */
  async proclaim(value: string | Uint8Array): Promise<void> {
    const bytes = bytesOf(value);
    const s = this.session;
    s.check();
    // Setting a value is idempotent: a retry after a lost answer is harmless.
    try {
      await s.cluster.call("/v1/election/proclaim", () => ({
        body: { name: this.name, sessionId: String(s.id), token: String(this.token), value: b64(bytes) },
      }));
    } catch (e) {
      if (e instanceof SessionGone) s.markGone(e);
      throw e;
    }
    this.current = bytes;
  }

  /**
   * Steps down; the next candidate in line is elected in the same log
   * entry. Resigning twice, or after the session ended, does nothing.
   *
   * @example
   * ```ts
   * await leadership.resign();
   * ```
   */
  async resign(): Promise<void> {
    if (this.resigned) return;
    this.resigned = true;
    const s = this.session;
    if (s.lease.reason !== undefined) return;
    let retried = false;
    try {
      await s.cluster.call("/v1/election/resign", (attempt) => {
        retried = retried || attempt > 0;
        return { body: { name: this.name, sessionId: String(s.id), token: String(this.token) } };
      });
    } catch (e) {
      // Only a retry may find the leadership already given up.
      if (retried && e instanceof NotHolder) return;
      if (e instanceof SessionGone) {
        s.markGone(e);
        return;
      }
      throw e;
    }
  }
}

/** @internal Campaigns until elected, the timeout, or the session's end. */
export async function campaign(session: Session, name: string, value: string | Uint8Array, o: CampaignOptions): Promise<Leadership> {
  const bytes = bytesOf(value);
  const end = o.timeoutMs === undefined ? Infinity : now() + o.timeoutMs;
  for (;;) {
    // The server bounds one wait; an unbounded campaign queues again when
    // it ends, keeping its place only for that long.
    const turn = Math.min(MAX_WAIT_MS, Math.max(0, end - now()));
    try {
      return await campaignOnce(session, name, bytes, turn, o.signal);
    } catch (e) {
      if (!(e instanceof WaitTimedOut) || now() >= end - 1 || !session.valid) throw e;
    }
  }
}

async function campaignOnce(s: Session, name: string, value: Uint8Array, waitMs: number, signal?: AbortSignal): Promise<Leadership> {
  s.check();
  await cancelsSettled(s, name);
  const requestId = b64(newRequestId());
  const ticket = s.ticket();
  const started = now();
  try {
    const r = await s.cluster.call<{ leader?: GrantJson }>(
      "/v1/election/campaign",
      () => {
        const left = Math.max(0, Math.floor(waitMs - (now() - started)));
        return {
          body: {
            name,
            sessionId: String(s.id),
            requestId,
            value: b64(value),
            waitTimeoutMs: String(left),
            seq: String(ticket.seq),
            ackedBelow: String(ticket.ackedBelow()),
          inFlight: ticket.inFlight(),
          },
          timeoutMs: s.cluster.options.attemptTimeoutMs + left,
        };
      },
      { deadlineMs: s.cluster.options.deadlineMs + waitMs, signal },
    );
    if (!r.leader) throw new ServerError("campaign answered without a leadership", { code: "INTERNAL" });
    return new Leadership(s, grantFrom(r.leader));
  } catch (e) {
    if (e instanceof SessionGone) s.markGone(e);
    if (signal?.aborted) cancelWaitSoon(s, name, requestId);
    throw e;
  } finally {
    ticket.done();
  }
}

/**
 * The leader of an election now and at every change, through failovers:
 * the stream is reopened on the new leader node, and a value already seen
 * is not yielded again, so a failover shows as nothing, or as the same
 * leader at worst. `null` means the election has no leader. Iterate with
 * `for await`; `break` or {@link Observation.close} ends it. Refusals that a
 * retry cannot fix (no right to read the name, a bad name) are thrown.
 *
 * @example
 * ```ts
 * for await (const leader of client.observe("scheduler")) {
 *   console.log(leader ? `leader: ${leader.metadataText}` : "no leader");
 * }
 * ```
 */
export class Observation implements AsyncIterableIterator<Grant | null> {
  private closed = false;
  private stream: OpenStream | undefined;
  private readonly sleeper = new Sleeper();
  private readonly gen: AsyncGenerator<Grant | null, void, undefined>;

  /** @internal Created by {@link Client.observe}. */
  constructor(
    private readonly cluster: Cluster,
    /** The election observed. */
    readonly name: string,
    private readonly onClose: (o: Observation) => void,
  ) {
    this.gen = this.run();
  }

  /**
   * The next leader (or `null`: none).
   *
   * @example
   * ```ts
   * const { value: first } = await observation.next();
   * ```
   */
  next(): Promise<IteratorResult<Grant | null>> {
    return this.gen.next();
  }

  /**
   * Ends the observation (what `break` in `for await` calls).
   *
   * @example
   * ```ts
   * await observation.return();
   * ```
   */
  return(): Promise<IteratorResult<Grant | null>> {
    this.close();
    return this.gen.return(undefined);
  }

  /**
   * Itself: an observation is iterated once.
   *
   * @example
   * ```ts
   * for await (const leader of observation) console.log(leader?.metadataText);
   * ```
   */
  [Symbol.asyncIterator](): Observation {
    return this;
  }

  /**
   * Hangs up now, even while waiting for the next change; a pending
   * `next()` then finishes with `done: true`.
   *
   * @example
   * ```ts
   * setTimeout(() => observation.close(), 60_000);
   * ```
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stream?.cancel();
    this.sleeper.wake();
    this.onClose(this);
  }

  private async *run(): AsyncGenerator<Grant | null, void, undefined> {
    let last: string | undefined;
    let backoff = 50;
    while (!this.closed) {
      const addr = this.cluster.target();
      try {
        this.stream = await this.cluster.openStream(addr, "/v1/election/observe", { name: this.name });
        if (this.closed) break;
        let buffered = "";
        for await (const chunk of this.stream.res) {
          buffered += typeof chunk === "string" ? chunk : text(chunk);
          let nl: number;
          while ((nl = buffered.indexOf("\n")) >= 0) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (line === "") continue;
            const msg = JSON.parse(line) as { leader?: GrantJson; error?: { code?: string; reason?: string; message?: string; leader?: string } };
            if (msg.error) throw errorFromBody(msg.error);
            this.cluster.remember(addr);
            backoff = 50;
            const g = msg.leader ? grantFrom(msg.leader) : null;
            // A proclaim keeps the token and changes the value; a reopened
            // stream repeats what was already seen.
            const key = g ? `${g.token}:${b64(g.metadata)}` : "";
            if (key !== last) {
              last = key;
              yield g;
            }
          }
        }
        // Ended without an error object: the node went away.
        this.cluster.forget(addr);
      } catch (raw) {
        if (this.closed) break;
        const e = raw instanceof RaftlockError ? raw : undefined;
        if (e !== undefined && !retryable(e)) throw e;
        if (e !== undefined ? this.cluster.learn(addr, e) : (this.cluster.forget(addr), false)) continue;
      } finally {
        this.stream?.cancel();
        this.stream = undefined;
      }
      await this.sleeper.sleep(jitter(backoff));
      backoff = Math.min(backoff * 2, 800);
    }
  }
}
