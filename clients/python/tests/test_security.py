"""TLS and bearer-token authentication against `raftlockd dev --tls
--auth` (a dev CA, certificates, and a root identity it prints)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import raftlock
from raftlock import _reasons, errors
from conftest import raftlockd


@pytest.fixture
def secure() -> Iterator[dict[str, str]]:
    p = subprocess.Popen(
        [raftlockd(), "dev", "--tls", "--auth"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    found: dict[str, str] = {}
    try:
        assert p.stdout is not None
        for line in p.stdout:
            for key in ("RAFTLOCK_ENDPOINTS", "RAFTLOCK_CACERT", "RAFTLOCK_AUTH_TOKEN"):
                if line.startswith(key + "="):
                    found[key] = line.strip().split("=", 1)[1]
            m = re.search(r"--cert (\S+) --key (\S+)", line)
            if m:
                found["cert"], found["key"] = m.group(1), m.group(2)
            if "nodes up" in line:
                break
        assert len(found) == 5, found
        yield found
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def test_tls_and_a_bearer_token(secure: dict[str, str]) -> None:
    ca = Path(secure["RAFTLOCK_CACERT"]).read_bytes()
    tls = raftlock.Tls(ca=ca)
    async with raftlock.Client(secure["RAFTLOCK_ENDPOINTS"], tls=tls, token=secure["RAFTLOCK_AUTH_TOKEN"]) as c:
        async with await c.session(ttl=5) as s:
            async with s.lock("team-a/job", timeout=5) as g:
                assert await c.validate("team-a/job", g.token)
    async with raftlock.Client(secure["RAFTLOCK_ENDPOINTS"], tls=tls) as anonymous:
        with pytest.raises(errors.Unauthenticated) as e:
            await anonymous.session(ttl=5)
        assert e.value.reason == "UNAUTHENTICATED"
    async with raftlock.Client(secure["RAFTLOCK_ENDPOINTS"], tls=tls, token="not-a-token") as wrong:
        with pytest.raises(errors.Unauthenticated):
            await wrong.session(ttl=5)


async def test_a_client_certificate_is_an_identity(secure: dict[str, str]) -> None:
    tls = raftlock.Tls(
        ca=Path(secure["RAFTLOCK_CACERT"]).read_bytes(),
        cert=Path(secure["cert"]).read_bytes(),
        key=Path(secure["key"]).read_bytes(),
    )
    async with raftlock.Client(secure["RAFTLOCK_ENDPOINTS"], tls=tls) as c:
        async with await c.session(ttl=5) as s:
            g = await s.lock("mtls/a", timeout=5)
            assert g.valid
            await g.release()


AUTH = """
[roles.team-a]
rules = [{{ prefix = "team-a/", allow = ["read", "lock"] }}]
[roles.root]
rules = [{{ prefix = "", allow = ["read", "lock", "admin"] }}]

[[identities]]
name = "root"
token_sha256 = "{root}"
roles = ["root"]

[[identities]]
name = "team-a-worker"
token_sha256 = "{team}"
roles = ["team-a"]
"""


def test_every_reason_maps_to_an_exception_class_by_reason_or_code() -> None:
    # A reason without a class of its own takes its code's; only a code
    # that names no kind of failure leaves it a ServerError.
    families = {"UNAVAILABLE", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "PERMISSION_DENIED"}
    for reason in errors.REASONS:
        cls = errors.class_of(reason)
        assert issubclass(cls, errors.RaftlockError)
        if cls is errors.ServerError:
            assert _reasons.CODES[reason] not in families, reason
    assert errors.class_of("A_REASON_FROM_A_NEWER_SERVER") is errors.ServerError


async def test_rights_and_limits_per_identity(tmp_path: Path) -> None:
    import hashlib

    from conftest import Cluster

    sha = lambda t: hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH.format(root=sha("root-token"), team=sha("team-a-token")))
    cluster = Cluster(
        extra=[
            "--auth-file", str(auth),
            "--max-sessions-per-identity", "2",
            "--max-locks-per-session", "1",
        ],
        token="root-token",
    )
    try:
        async with raftlock.Client(cluster.endpoints, token="team-a-token") as team:
            s = await team.session(ttl=10)
            with pytest.raises(errors.PermissionDenied) as denied:
                await s.lock("team-b/ledger", timeout=1)
            assert denied.value.reason == "PERMISSION_DENIED"
            await s.lock("team-a/one", timeout=1)
            with pytest.raises(errors.TooManyLocks):
                await s.lock("team-a/two", timeout=1)
            await team.session(ttl=10)
            with pytest.raises(errors.LimitExceeded) as limit:
                await team.session(ttl=10)
            assert limit.value.reason == "LIMIT_EXCEEDED"
    finally:
        cluster.close()


async def test_from_env_reads_what_the_cli_reads(secure: dict[str, str]) -> None:
    env = {k: v for k, v in secure.items() if k.startswith("RAFTLOCK_")}
    env["RAFTLOCK_CLIENT_NAME"] = "from-env-test"
    async with raftlock.Client.from_env(env) as c:
        assert c.client_name == "from-env-test"
        async with await c.session(ttl=5) as s:
            async with s.lock("team-a/from-env", timeout=5) as g:
                assert await c.validate("team-a/from-env", g.token)
    with raftlock.sync.Client.from_env(env) as sc:
        with sc.session(ttl=5) as ss:
            with ss.lock("team-a/from-env-sync", timeout=5) as sg:
                assert sc.validate("team-a/from-env-sync", sg.token)
    # Without the token the same variables reach the cluster, which refuses.
    async with raftlock.Client.from_env({**env, "RAFTLOCK_AUTH_TOKEN": ""}) as anonymous:
        with pytest.raises(errors.Unauthenticated):
            await anonymous.session(ttl=5)


def test_from_env_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(errors.InvalidArgument, match="RAFTLOCK_CACERT=.*missing.pem"):
        raftlock.Client.from_env({"RAFTLOCK_CACERT": missing})
    pem = tmp_path / "client.pem"
    pem.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(errors.InvalidArgument, match="RAFTLOCK_KEY"):
        raftlock.Client.from_env({"RAFTLOCK_CERT": str(pem)})
    # Nothing set: the CLI's default endpoint.
    assert raftlock.Client.from_env({})._endpoints == ["127.0.0.1:7000"]
