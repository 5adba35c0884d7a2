"""The README's examples run against a real cluster and say what they
promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Cluster

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "example, expect",
    [
        ("cron_singleton.py", "report written under token"),
        ("dedupe_jobs.py", "processed"),
        ("fenced_writer.py", "refused: stale token"),
    ],
)
def test_example(cluster: Cluster, example: str, expect: str) -> None:
    env = dict(os.environ, RAFTLOCK_ENDPOINTS=",".join(cluster.endpoints))
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / example)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert expect in out.stdout, out.stdout
    if example == "dedupe_jobs.py":
        done = [line for line in out.stdout.splitlines() if "processed" in line]
        jobs = [j for line in done for j in line.split("[", 1)[1].strip("]").replace("'", "").split(", ") if j]
        assert len(jobs) == len(set(jobs)), f"a job was processed twice: {out.stdout}"
