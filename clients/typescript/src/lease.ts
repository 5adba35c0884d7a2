/**
 * A session's lease as this client judges it (DESIGN.md rule 4): valid only
 * until the send time of the last acknowledged keep-alive + TTL − margin.
 * The leader counts the TTL from when it *received* that keep-alive, which
 * is later, so past this client's deadline the leader may have expired the
 * session but before it, it cannot have. Once past, the lease is lost for
 * good: a late acknowledgement revives nothing, since the leader may have
 * expired the session and granted its locks meanwhile.
 * @packageDocumentation
 */

import { RaftlockError, SessionLost } from "./errors";
import { now } from "./time";

/**
 * The part of a TTL this library does not count on: a tenth, at least
 * 100 ms. It covers the leader's and the client's clocks running at
 * slightly different rates, and scheduling delays.
 *
 * @example
 * ```ts
 * safetyMargin(10_000); // 1000
 * safetyMargin(1_000);  // 100
 * ```
 */
export function safetyMargin(ttlMs: number): number {
  return Math.max(ttlMs / 10, 100);
}

/** Shared by a session and its keep-alive loop; only acknowledged
 * keep-alives move the deadline, and only forward. */
export class Lease {
  private until: number;
  private ended: RaftlockError | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private resolveLost!: (reason: RaftlockError) => void;
  /** Resolves once, with the reason, when the lease is lost or ended. */
  readonly lost: Promise<RaftlockError>;

  /** The lease of session `id` created by a request sent at `sentAt`. */
  constructor(readonly id: bigint, readonly ttlMs: number, sentAt: number) {
    this.until = sentAt + ttlMs - safetyMargin(ttlMs);
    this.lost = new Promise((resolve) => (this.resolveLost = resolve));
    this.arm();
  }

  /** Whether the session still counts as alive here. */
  get valid(): boolean {
    return this.ended === undefined && now() < this.until;
  }

  /** The last deadline computed (monotonic ms), passed or not. */
  get validUntil(): number {
    return this.until;
  }

  /** Why it is no longer valid, or `undefined` while it is. */
  get reason(): RaftlockError | undefined {
    if (this.ended === undefined && now() >= this.until) this.expire();
    return this.ended;
  }

  /** Records an acknowledged keep-alive sent at `sentAt`, unless the lease
   * already counts as lost. */
  acknowledged(sentAt: number): void {
    if (this.ended !== undefined) return;
    if (now() >= this.until) {
      this.expire();
      return;
    }
    const next = sentAt + this.ttlMs - safetyMargin(this.ttlMs);
    if (next > this.until) {
      this.until = next;
      this.arm();
    }
  }

  /** Ends the lease for `reason` (the first reason wins). */
  end(reason: RaftlockError): void {
    if (this.ended !== undefined) return;
    this.ended = reason;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.resolveLost(reason);
  }

  private expire(): void {
    this.end(new SessionLost(`session ${this.id} lost: no keep-alive acknowledged within its TTL minus the safety margin`, { code: "FAILED_PRECONDITION" }));
  }

  /** A timer at the deadline, so `lost` resolves on time even when nothing
   * else runs (the keep-alive loop may be waiting on a frozen node). */
  private arm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (now() >= this.until) this.expire();
      else this.arm();
    }, Math.max(0, this.until - now()));
  }
}
