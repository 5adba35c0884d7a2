/**
 * The proto3 JSON mapping the server speaks: 64-bit integers travel as
 * strings (tokens and session ids pass 2^53, so they are `bigint` here),
 * bytes as base64, and zero values are left out.
 * @packageDocumentation
 */

import { randomBytes } from "node:crypto";

/**
 * How a lock is held.
 *
 * @example
 * ```ts
 * const m: LockMode = "shared";
 * ```
 */
export type LockMode = "exclusive" | "shared";

/**
 * A lock held by a session, as the cluster recorded it.
 *
 * @example
 * ```ts
 * const g: Grant = guard.grant;
 * console.log(g.token, g.sessionId, g.metadataText);
 * ```
 */
export interface Grant {
  /** Fencing token: strictly increasing per lock, in grant order. */
  readonly token: bigint;
  /** Lock name. */
  readonly name: string;
  /** How it is held. */
  readonly mode: LockMode;
  /** The holding session. */
  readonly sessionId: bigint;
  /** The request id of the acquisition that produced it (16 bytes). */
  readonly requestId: Uint8Array;
  /** When it was granted, Unix ms on the leader's clock (informational). */
  readonly grantedAtMs: number;
  /** Bytes the holder attached (an election's value). */
  readonly metadata: Uint8Array;
  /** `metadata` decoded as UTF-8. */
  readonly metadataText: string;
  /** Permits of a semaphore this hold takes (1 for an exclusive hold). */
  readonly count: number;
  /**
   * The hold cap, ms (0: none): the leader releases the hold this long
   * after granting it, even though the session lives. The server's word,
   * which may be a default it set for the name's prefix.
   */
  readonly maxHoldMs: number;
  /** The lock-delay this hold set, ms (0: none): if it ends without a
   * release, nobody is granted the lock for this long. */
  readonly lockDelayMs: number;
}

/** A grant as JSON. */
export interface GrantJson {
  token?: string;
  name?: string;
  mode?: string;
  sessionId?: string;
  requestId?: string;
  grantedAtMs?: string;
  metadata?: string;
  count?: number;
  maxHoldMs?: string;
  lockDelayMs?: string;
}

/** A 64-bit integer from its JSON form (a string, or a number from a lenient
 * encoder); absent means zero. */
export function u64(v: unknown): bigint {
  if (v === undefined || v === null || v === "") return 0n;
  if (typeof v === "string" || typeof v === "number" || typeof v === "bigint") return BigInt(v);
  throw new TypeError(`not a 64-bit integer: ${String(v)}`);
}

/** A small integer (uint32, or a Unix ms instant) from its JSON form. */
export function num(v: unknown): number {
  if (v === undefined || v === null || v === "") return 0;
  return Number(v);
}

/** Bytes as base64. */
export function b64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** Bytes from base64 (absent: none). */
export function unb64(s: unknown): Uint8Array {
  return typeof s === "string" && s !== "" ? new Uint8Array(Buffer.from(s, "base64")) : new Uint8Array(0);
}

/** UTF-8 text of bytes. */
export function text(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

/** Bytes of a caller's value: strings are UTF-8. */
export function bytesOf(v: string | Uint8Array | undefined): Uint8Array {
  if (v === undefined) return new Uint8Array(0);
  return typeof v === "string" ? new Uint8Array(Buffer.from(v, "utf8")) : v;
}

/** A token or id the caller gave: bigint, decimal string or safe integer. */
export function toU64(v: bigint | string | number, what: string): bigint {
  try {
    const b = BigInt(v);
    if (b < 0n || b >= 1n << 64n) throw new RangeError();
    if (typeof v === "number" && !Number.isSafeInteger(v)) throw new RangeError();
    return b;
  } catch {
    throw new TypeError(`${what} must be an unsigned 64-bit integer, got ${String(v)}`);
  }
}

/** A grant from its JSON form. */
export function grantFrom(g: GrantJson): Grant {
  const metadata = unb64(g.metadata);
  return {
    token: u64(g.token),
    name: g.name ?? "",
    mode: g.mode === "LOCK_MODE_SHARED" ? "shared" : "exclusive",
    sessionId: u64(g.sessionId),
    requestId: unb64(g.requestId),
    grantedAtMs: num(g.grantedAtMs),
    metadata,
    metadataText: text(metadata),
    // Absent from a node older than counted permits: one.
    count: Math.max(num(g.count), 1),
    maxHoldMs: num(g.maxHoldMs),
    lockDelayMs: num(g.lockDelayMs),
  };
}

/**
 * A new request id: a UUID v7 (48 bits of Unix ms, then random bits), as
 * the proto suggests, so that ids sort by creation time in server logs.
 */
export function newRequestId(): Uint8Array {
  const b = new Uint8Array(randomBytes(16));
  let ms = Date.now();
  for (let i = 5; i >= 0; i--) {
    b[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  b[6] = 0x70 | (b[6] & 0x0f);
  b[8] = 0x80 | (b[8] & 0x3f);
  return b;
}

