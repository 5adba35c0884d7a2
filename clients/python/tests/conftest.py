"""A real raftlockd cluster per test (no mocks of the server): three
processes on free loopback ports in a temp dir, killed by PID afterwards.
The binary is $RAFTLOCKD, else the workspace's target/debug/raftlockd."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import grpc
import pytest

from raftlock.v1 import raftlock_pb2 as pb
from raftlock.v1 import raftlock_pb2_grpc as rpc

ROOT = Path(__file__).resolve().parents[3]


def raftlockd() -> str:
    path = os.environ.get("RAFTLOCKD") or str(ROOT / "target" / "debug" / "raftlockd")
    if not Path(path).exists():
        pytest.fail(f"{path} not found: run `cargo build --bins` first, or set RAFTLOCKD")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(
        self, n: int = 3, extra: Optional[list[str]] = None, token: Optional[str] = None
    ) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="raftlock-py-")
        self.extra = extra or []
        self.token = token
        self.client_addrs = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        self.peer_addrs = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        self.initial = ",".join(
            f"{i + 1}={p}/{c}" for i, (p, c) in enumerate(zip(self.peer_addrs, self.client_addrs))
        )
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        for i in range(1, n + 1):
            self.start(i)
        self.wait_for_leader()

    @property
    def endpoints(self) -> list[str]:
        return list(self.client_addrs)

    def start(self, node: int) -> None:
        log = open(Path(self.dir.name) / f"n{node}.log", "ab")
        self.procs[node] = subprocess.Popen(
            [
                raftlockd(),
                "--id", str(node),
                "--data-dir", str(Path(self.dir.name) / f"n{node}"),
                "--listen-client", self.client_addrs[node - 1],
                "--listen-peer", self.peer_addrs[node - 1],
                "--initial-cluster", self.initial,
                *self.extra,
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )

    def kill(self, node: int) -> None:
        p = self.procs.pop(node, None)
        if p is not None:
            p.kill()
            p.wait()

    def status(self, node: int) -> Optional[pb.StatusResponse]:
        try:
            with grpc.insecure_channel(self.client_addrs[node - 1]) as ch:
                md = [("authorization", f"Bearer {self.token}")] if self.token else None
                r: pb.StatusResponse = rpc.ClusterStub(ch).Status(
                    pb.StatusRequest(), timeout=0.5, metadata=md
                )
                return r
        except grpc.RpcError:
            return None

    def leader(self) -> Optional[int]:
        for node in self.procs:
            s = self.status(node)
            if s is not None and s.role == pb.ROLE_LEADER and s.leader_id == s.node_id:
                return node
        return None

    def wait_for_leader(self, within: float = 30.0, other_than: Optional[int] = None) -> int:
        stop = time.monotonic() + within
        while time.monotonic() < stop:
            node = self.leader()
            if node is not None and node != other_than:
                return node
            time.sleep(0.1)
        raise TimeoutError("no leader")

    def logs(self, lines: int = 40) -> str:
        """The last lines of every node's log, for a failed test's report."""
        out = []
        for log in sorted(Path(self.dir.name).glob("n*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(out)

    def close(self) -> None:
        for node in list(self.procs):
            p = self.procs.pop(node)
            p.send_signal(signal.SIGKILL)
            p.wait()
        self.dir.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # Lets the cluster fixture see whether its test failed.
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            # A failure against a real cluster is read from the nodes' logs.
            report.sections.append(("raftlockd logs", c.logs()))
        c.close()
