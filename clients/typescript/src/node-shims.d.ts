// The few Node.js APIs this package and its tests use, declared by hand:
// Debian packages TypeScript but not @types/node, and the package takes
// nothing from npm. Each declaration is the subset of Node 18+'s real API
// that the code calls, with Node's own signatures. Delete this file if you
// build with @types/node installed.

declare var process: {
  readonly pid: number;
  readonly argv: string[];
  readonly env: Record<string, string | undefined>;
  readonly execPath: string;
  exitCode: number | undefined;
  exit(code?: number): never;
  kill(pid: number, signal?: string | number): true;
  on(event: "exit", listener: (code: number) => void): unknown;
};

declare var console: {
  log(...data: unknown[]): void;
  error(...data: unknown[]): void;
};

declare var performance: {
  now(): number;
  readonly timeOrigin: number;
};

declare var __dirname: string;

// Node 18+ has the DOM's AbortController and AbortSignal as globals.
interface AbortSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}
declare var AbortController: {
  new (): { readonly signal: AbortSignal; abort(reason?: unknown): void };
};

interface NodeTimer {
  ref(): this;
  unref(): this;
  hasRef(): boolean;
}
declare function setTimeout(callback: (...args: any[]) => void, ms?: number): NodeTimer;
declare function clearTimeout(timer: NodeTimer | undefined): void;
declare function setInterval(callback: (...args: any[]) => void, ms?: number): NodeTimer;
declare function clearInterval(timer: NodeTimer | undefined): void;

type BufferEncoding = "utf8" | "hex" | "base64" | "ascii" | "latin1";
interface Buffer extends Uint8Array {
  toString(encoding?: BufferEncoding): string;
}
declare var Buffer: {
  from(data: string, encoding?: BufferEncoding): Buffer;
  from(data: Uint8Array | readonly number[]): Buffer;
  from(arrayBuffer: ArrayBufferLike, byteOffset?: number, length?: number): Buffer;
  concat(list: readonly Uint8Array[]): Buffer;
  byteLength(s: string, encoding?: BufferEncoding): number;
};

declare module "node:events" {
  class EventEmitter {
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    off(event: string, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string): this;
  }
}

declare module "node:net" {
  import { EventEmitter } from "node:events";
  interface AddressInfo {
    address: string;
    family: string;
    port: number;
  }
  class Socket extends EventEmitter {
    readonly connecting: boolean;
    setNoDelay(noDelay?: boolean): this;
    destroy(error?: Error): this;
  }
  class Server extends EventEmitter {
    listen(port: number, host: string, callback?: () => void): this;
    address(): AddressInfo | string | null;
    close(callback?: (err?: Error) => void): this;
  }
  function createServer(): Server;
}

declare module "node:stream" {
  import { EventEmitter } from "node:events";
  class Readable extends EventEmitter implements AsyncIterable<any> {
    destroy(error?: Error): this;
    setEncoding(encoding: BufferEncoding): this;
    [Symbol.asyncIterator](): AsyncIterableIterator<any>;
  }
}

declare module "node:http" {
  import { EventEmitter } from "node:events";
  import { Socket } from "node:net";
  import { Readable } from "node:stream";
  interface AgentOptions {
    keepAlive?: boolean;
  }
  class Agent extends EventEmitter {
    constructor(options?: AgentOptions);
    destroy(): void;
  }
  interface RequestOptions {
    host?: string;
    port?: number;
    method?: string;
    path?: string;
    agent?: Agent;
    headers?: Record<string, string>;
  }
  class IncomingMessage extends Readable {
    readonly statusCode: number | undefined;
    readonly headers: Record<string, string | string[] | undefined>;
  }
  class ClientRequest extends EventEmitter {
    on(event: "socket", listener: (socket: Socket) => void): this;
    on(event: "response", listener: (res: IncomingMessage) => void): this;
    on(event: "error", listener: (err: Error) => void): this;
    on(event: "close", listener: () => void): this;
    end(data?: string): this;
    destroy(error?: Error): this;
  }
  function request(options: RequestOptions, callback?: (res: IncomingMessage) => void): ClientRequest;
}

declare module "node:https" {
  import * as http from "node:http";
  interface AgentOptions extends http.AgentOptions {
    ca?: string | Uint8Array;
    cert?: string | Uint8Array;
    key?: string | Uint8Array;
    servername?: string;
  }
  class Agent extends http.Agent {
    constructor(options?: AgentOptions);
  }
  function request(options: http.RequestOptions, callback?: (res: http.IncomingMessage) => void): http.ClientRequest;
}

declare module "node:crypto" {
  function randomBytes(size: number): Buffer;
  function randomUUID(): string;
  interface Hash {
    update(data: string): Hash;
    digest(encoding: "hex"): string;
  }
  function createHash(algorithm: string): Hash;
}

declare module "node:os" {
  function hostname(): string;
  function tmpdir(): string;
}

declare module "node:path" {
  function join(...paths: string[]): string;
  function resolve(...paths: string[]): string;
}

declare module "node:fs" {
  function mkdtempSync(prefix: string): string;
  function mkdirSync(path: string, options?: { recursive?: boolean }): string | undefined;
  function rmSync(path: string, options?: { recursive?: boolean; force?: boolean }): void;
  function existsSync(path: string): boolean;
  function readFileSync(path: string, encoding: "utf8"): string;
  function writeFileSync(path: string, data: string): void;
  function appendFileSync(path: string, data: string): void;
  function openSync(path: string, flags: string): number;
  function closeSync(fd: number): void;
  function readdirSync(path: string): string[];
}

declare module "node:child_process" {
  import { EventEmitter } from "node:events";
  import { Readable } from "node:stream";
  interface SpawnOptions {
    cwd?: string;
    env?: Record<string, string | undefined>;
    stdio?: "ignore" | "inherit" | "pipe" | Array<"ignore" | "inherit" | "pipe" | number>;
  }
  class ChildProcess extends EventEmitter {
    readonly pid: number | undefined;
    readonly exitCode: number | null;
    readonly signalCode: string | null;
    readonly stdout: Readable | null;
    readonly stderr: Readable | null;
    kill(signal?: string): boolean;
  }
  function spawn(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
}

declare module "node:test" {
  interface TestOptions {
    timeout?: number;
    skip?: boolean | string;
    concurrency?: number | boolean;
  }
  type Fn = () => void | Promise<void>;
  function test(name: string, fn: Fn): Promise<void>;
  function test(name: string, options: TestOptions, fn: Fn): Promise<void>;
  function describe(name: string, fn: () => void): void;
  function describe(name: string, options: TestOptions, fn: () => void): void;
  function before(fn: Fn, options?: TestOptions): void;
  function after(fn: Fn, options?: TestOptions): void;
  export { test, describe, before, after };
  export default test;
}

declare module "node:assert/strict" {
  function assert(value: unknown, message?: string): asserts value;
  namespace assert {
    function ok(value: unknown, message?: string): asserts value;
    function equal<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    function notEqual(actual: unknown, expected: unknown, message?: string): void;
    function deepEqual<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    function match(value: string, regexp: RegExp, message?: string): void;
    function rejects(
      block: Promise<unknown> | (() => Promise<unknown>),
      error?: (new (...args: any[]) => object) | ((err: any) => boolean) | object,
      message?: string,
    ): Promise<void>;
    function throws(block: () => unknown, error?: (new (...args: any[]) => object) | ((err: any) => boolean) | object, message?: string): void;
    function fail(message?: string): never;
  }
  export = assert;
}
