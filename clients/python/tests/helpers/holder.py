"""A separate process that holds a lock and reports, every 20 ms, whether
its client library says the lock is still valid: wall-clock time, validity,
and the library's deadline on the wall clock. Used to pause it (SIGSTOP)
and to check mutual exclusion across processes."""

from __future__ import annotations

import sys
import threading
import time

import raftlock.sync as raftlock


def main() -> None:
    endpoints, name, ttl, mode, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
    with raftlock.Client(endpoints) as client, open(out, "a", buffering=1) as log:
        session = client.session(ttl=ttl)
        if mode == "hold":
            fired = threading.Event()

            def on_lost(reason: Exception) -> None:
                log.write(f"on_lost {time.time()} {type(reason).__name__}\n")
                fired.set()

            session.on_lost(on_lost)
            g = session.lock(name, timeout=30)
            log.write(f"held {g.token} {time.time()}\n")
            while True:
                now = time.time()
                valid = g.valid
                deadline = now + (session._inner.valid_until - time.monotonic())
                log.write(f"tick {now} {int(valid)} {deadline}\n")
                if not valid:
                    log.write(f"lost {time.time()}\n")
                    fired.wait(5)
                    return
                time.sleep(0.02)
        else:
            # "mutex N": take the lock N times, recording each hold.
            for _ in range(int(mode.split(":")[1])):
                with session.lock(name, timeout=30) as g:
                    start = time.time()
                    time.sleep(0.01)
                    g.check()
                    log.write(f"hold {g.token} {start} {time.time()}\n")


if __name__ == "__main__":
    main()
