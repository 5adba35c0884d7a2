/**
 * Monotonic time and timers. Leases are judged on `performance.now()`,
 * never `Date`, whose jumps (NTP, an operator) would stretch or shrink a
 * deadline.
 * @packageDocumentation
 */

/** Milliseconds on the monotonic clock. */
export function now(): number {
  return performance.now();
}

/** `ms` scaled by a random factor in [0.5, 1.5), so that clients that failed
 * together do not retry together. */
export function jitter(ms: number): number {
  return ms * (0.5 + Math.random());
}

/** A sleep that can be cut short: background loops sleep on it so that
 * closing them does not wait out their timer. */
export class Sleeper {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private wakeUp: (() => void) | undefined;

  sleep(ms: number): Promise<void> {
    this.wake();
    return new Promise((resolve) => {
      this.wakeUp = resolve;
      this.timer = setTimeout(() => this.wake(), Math.max(0, ms));
    });
  }

  wake(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const w = this.wakeUp;
    this.wakeUp = undefined;
    if (w) w();
  }
}

/** A plain sleep. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
