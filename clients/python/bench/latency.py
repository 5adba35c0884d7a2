#!/usr/bin/env python3
"""Acquire + release latency of one client: this package against the Rust
client (`raftlock bench`), on the same cluster, alternating runs, medians.

    RAFTLOCK_ENDPOINTS=... python bench/latency.py [--raftlock PATH] [--runs 3] [--seconds 5]

Prints each run and the ratio of the medians (Python p50 / Rust p50).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import raftlock

ROOT = Path(__file__).resolve().parents[3]


async def python_run(endpoints: str, seconds: float) -> tuple[float, int]:
    lat: list[float] = []
    async with raftlock.Client(endpoints) as client:
        async with await client.session(ttl=10) as s:
            stop = time.monotonic() + seconds
            i = 0
            prefix = uuid.uuid4().hex[:8]
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                g = await s.lock(f"bench/{prefix}/{i % 1024}", timeout=5)
                await g.release()
                lat.append(time.perf_counter() - t0)
                i += 1
    return statistics.median(lat) * 1000, len(lat)


def rust_run(binary: str, endpoints: str, seconds: float) -> tuple[float, int]:
    out = subprocess.run(
        [binary, "bench", "--endpoints", endpoints, "--workload", "uncontended", "--clients", "1",
         "--duration", f"{seconds}s", "--runs", "1", "--output", "json"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().splitlines()[-1]
    m = json.loads(out)["median"]
    return float(m["p50_ms"]), int(m["ops"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", default=os.environ.get("RAFTLOCK_ENDPOINTS"))
    ap.add_argument("--raftlock", default=str(ROOT / "target" / "release" / "raftlock"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    if not a.endpoints:
        ap.error("give --endpoints or RAFTLOCK_ENDPOINTS (raftlockd dev prints them)")
    py, rs = [], []
    for run in range(1, a.runs + 1):
        r = rust_run(a.raftlock, a.endpoints, a.seconds)
        p = asyncio.run(python_run(a.endpoints, a.seconds))
        rs.append(r[0])
        py.append(p[0])
        print(f"run {run}: rust p50 {r[0]:.2f} ms ({r[1]} ops)   python p50 {p[0]:.2f} ms ({p[1]} ops)")
    mr, mp = statistics.median(rs), statistics.median(py)
    print(f"median p50: rust {mr:.2f} ms, python {mp:.2f} ms, python/rust = {mp / mr:.2f}")


if __name__ == "__main__":
    main()
