package io.github.raftlock;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Scheduled jobs that run on one instance only, as ShedLock: see
 * {@link Session#runOnce(String, Duration, Job)}.
 *
 * <pre>{@code
 * RunOnce.Result<Void> r = session.runOnce("cron/nightly-report", Duration.ofMinutes(50), token -> {
 *     report(token);
 *     return null;
 * });
 * }</pre>
 */
public final class RunOnce {
    private RunOnce() {}

    /**
     * A job run under a lock, given the hold's fencing token.
     *
     * <pre>{@code
     * RunOnce.Job<Integer> job = token -> exportRows(token);
     * }</pre>
     *
     * @param <T> its result
     */
    @FunctionalInterface
    public interface Job<T> {
        /**
         * Runs the job; it is interrupted if the lock is lost meanwhile.
         *
         * @param token the fencing token
         * @return the result
         * @throws Exception whatever the job fails with
         */
        T run(long token) throws Exception;
    }

    /**
     * What a run did: {@link #ran()} is false when another holder had the lock.
     *
     * <pre>{@code
     * if (result.ran()) log.info("exported {}", result.value());
     * }</pre>
     *
     * @param <T> the job's result
     * @param ran whether this call ran the job
     * @param value what the job returned (null when it did not run)
     */
    public record Result<T>(boolean ran, T value) {}

    static <T> Result<T> run(Session s, String name, Duration holdAtLeast, Job<T> job) throws Exception {
        if (holdAtLeast.isNegative()) {
            throw Errors.invalidArgument("holdAtLeast must not be negative, got " + holdAtLeast);
        }
        long holdUntil = System.nanoTime() + holdAtLeast.toNanos();
        LockGuard g;
        try {
            g = s.lock(name).tryAcquire();
        } catch (LockedException e) {
            return new Result<>(false, null);
        }
        try {
            T v = g.runWhileHeld(() -> job.run(g.token()));
            // The job is done: losing the lock while it is kept for the rest of the window
            // harms nothing, so a loss now only ends the wait.
            long rest = holdUntil - System.nanoTime();
            if (rest > 0) {
                try {
                    g.lost().get(rest, TimeUnit.NANOSECONDS);
                } catch (TimeoutException | ExecutionException e) {
                    // The window passed (or nothing to learn): release now.
                }
            }
            return new Result<>(true, v);
        } finally {
            g.close();
        }
    }
}
