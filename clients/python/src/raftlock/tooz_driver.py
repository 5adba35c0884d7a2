"""A `tooz <https://docs.openstack.org/tooz/>`_ driver backed by raftlock:
locks (exclusive and shared), groups with members and capabilities,
join and leave watchers, and leader election, over one raftlock session
per coordinator.

Install with ``pip install "raftlock[tooz]"``; tooz finds the driver by the
``raftlock`` URL scheme::

    from tooz import coordination

    coord = coordination.get_coordinator(
        "raftlock://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000?timeout=30", b"worker-1"
    )
    coord.start(start_heart=True)
    with coord.get_lock(b"reports/daily"):
        build_report()
    coord.stop()

URL options (``raftlock://HOST:PORT[,HOST:PORT...]?OPTION=VALUE&...``):

============  =========  ==================================================
Option        Default    Meaning
============  =========  ==================================================
timeout       30         Seconds a coordinator's session lives without a
                         ``heartbeat()``: its locks, memberships and
                         leaderships end that long after the last one.
deadline      15         Seconds a call retries an unavailable cluster
                         (a leader election) before it fails.
token         (none)     Bearer token, for a cluster with authentication.
cacert        (none)     CA certificate (PEM file); turns TLS on.
cert, key     (none)     This client's certificate and key (PEM files).
client_name   tooz:ID    How the session is shown to operators.
============  =========  ==================================================

A URL without hosts (``raftlock://``) reads the endpoints and credentials
from the environment, as the ``raftlock`` CLI does
(:meth:`raftlock.sync.Client.from_env`).

How tooz maps onto raftlock (names are percent-encoded ids):

- A **lock** is the raftlock lock ``tooz/locks/NAME``, held by the
  coordinator's session; ``acquire(shared=True)`` takes it shared. Lock
  objects of one coordinator exclude each other locally first, since a
  session holds a lock once. ``break_()`` is a ``ForceRelease`` (the
  ``admin`` right).
- A **group** is the semaphore ``tooz/groups/GROUP``: it exists while it
  has a size (``Resize``), which outlives sessions, so an empty group is
  kept until ``delete_group``. A **member** holds one permit of it, with
  its member id and capabilities in the grant's metadata (msgpack, at most
  4 KiB): it leaves when it calls ``leave_group`` or when its session ends.
- A group's **leader** holds the lock ``tooz/leaders/GROUP``, taken by
  ``run_watchers()`` for the groups this coordinator watches with
  ``watch_elected_as_leader``; ``stand_down_group_leader`` releases it.

Liveness follows tooz's model, not the raftlock clients' background
keep-alive: ``heartbeat()`` renews the session (start the coordinator
with ``start(start_heart=True)``, or call it at least every ``timeout``
seconds), so a process whose loop is stuck loses its locks, memberships
and leaderships after ``timeout`` even though the process lives. After a
session is lost the next ``heartbeat()`` opens a new one; what the old one
held is gone (its lock objects' ``release()`` answer ``False``).

Not supported: ``update_capabilities`` (a grant's metadata is set when it
is granted; leave and join again with the new capabilities), and eventlet
(grpcio does not run under it; the driver refuses to start in a process
eventlet has monkey-patched). Coordinators may be used from many threads.
Group creation and deletion check and then act in two steps: two
coordinators that create one group at once both succeed.
"""

from __future__ import annotations

import datetime
import functools
import logging
import sys
import threading
import time
import urllib.parse
from typing import Any, Callable, Optional, TypeVar, Union

import tooz
from tooz import coordination, locking, utils

from . import errors, sync
from .aio import Grant, Tls

LOG = logging.getLogger(__name__)

T = TypeVar("T")

LOCKS = "tooz/locks/"
GROUPS = "tooz/groups/"
LEADERS = "tooz/leaders/"

#: Permits of a group's semaphore: one per member, far more than any group
#: has, since a group is not meant to limit its members.
GROUP_PERMITS = 1_000_000

DEFAULT_TIMEOUT = 30.0


def _encode(name: Union[bytes, str]) -> str:
    """A tooz id (bytes, or str that tooz lets through) as a lock-name
    segment: percent-encoded, so every byte string maps to one printable
    name and back."""
    return urllib.parse.quote(name if isinstance(name, bytes) else name.encode("utf-8"), safe="")


def _decode(segment: str) -> bytes:
    return urllib.parse.unquote_to_bytes(segment)


def _as_bytes(member_id: Union[bytes, str]) -> bytes:
    return member_id if isinstance(member_id, bytes) else member_id.encode("utf-8")


def _translated(fn: Callable[..., T]) -> Callable[..., T]:
    """raftlock's errors as tooz's: a cluster that cannot be reached is a
    ToozConnectionError, any other refusal a ToozError with the raftlock
    error as its cause."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except errors.Unavailable as e:
            utils.raise_with_cause(coordination.ToozConnectionError, str(e), cause=e)
        except errors.RaftlockError as e:
            utils.raise_with_cause(tooz.ToozError, str(e), cause=e)
        raise AssertionError("unreachable")  # pragma: no cover

    return wrapper


def _member_of(grant: Grant) -> tuple[Optional[bytes], Any]:
    """The member id and capabilities a group grant carries (``None`` for
    a grant this driver did not make)."""
    try:
        record = utils.loads(grant.metadata)
    except Exception:
        return None, None
    if not isinstance(record, dict) or not isinstance(record.get("member_id"), bytes):
        return None, None
    return record["member_id"], record.get("capabilities")


def _eventlet_patched() -> bool:
    patcher = sys.modules.get("eventlet.patcher")
    if patcher is None:
        return False
    try:
        return bool(patcher.is_monkey_patched("thread"))
    except Exception:
        return False


class _LockState:
    """What one coordinator holds of one lock, shared by its lock objects:
    a session holds a lock once, so they take turns here first."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        # None: free here; "busy": one object is asking the cluster;
        # "exclusive" / "shared": held.
        self.mode: Optional[str] = None
        self.shared_holds = 0
        self.guard: Optional[sync.Guard] = None


class RaftlockLock(locking.Lock):
    """A tooz lock on the raftlock lock ``tooz/locks/NAME``."""

    def __init__(self, coord: "RaftlockDriver", name: bytes) -> None:
        super().__init__(name)
        self._coord = coord
        self._lock_name = LOCKS + _encode(name)
        self._state: Optional[_LockState] = None
        self._exclusive = False
        self._shared = 0

    @_translated
    def acquire(
        self, blocking: Union[bool, float] = True, shared: bool = False, timeout: Optional[float] = None
    ) -> bool:
        wait, timeout = utils.convert_blocking(blocking, timeout)
        end = None if not wait or timeout is None else time.monotonic() + float(timeout)

        def left() -> Optional[float]:
            if not wait:
                return 0.0
            return None if end is None else max(0.0, end - time.monotonic())

        state = self._coord._lock_state(self.name)
        with state.cond:
            if shared:
                ok = state.cond.wait_for(lambda: state.mode in (None, "shared"), left())
            else:
                ok = state.cond.wait_for(lambda: state.mode is None, left())
            if not ok:
                return False
            if state.mode == "shared":
                # Already held shared by this coordinator: one more hold.
                state.shared_holds += 1
                self._state = state
                self._shared += 1
                return True
            state.mode = "busy"
        guard: Optional[sync.Guard] = None
        try:
            session = self._coord._live_session()
            remaining = left()
            if remaining is not None and remaining <= 0.0:
                guard = session.try_lock(self._lock_name, shared=shared)
            else:
                try:
                    guard = session.lock(self._lock_name, shared=shared, timeout=remaining)
                except errors.LockTimeout:
                    guard = None
        finally:
            with state.cond:
                if guard is None:
                    state.mode = None
                else:
                    state.mode = "shared" if shared else "exclusive"
                    state.guard = guard
                    state.shared_holds = 1 if shared else 0
                    self._state = state
                    if shared:
                        self._shared += 1
                    else:
                        self._exclusive = True
                state.cond.notify_all()
        return guard is not None

    @_translated
    def release(self) -> bool:
        state = self._state
        if state is None or not (self._exclusive or self._shared):
            return False
        with state.cond:
            if self._exclusive:
                self._exclusive = False
            else:
                self._shared -= 1
                state.shared_holds -= 1
                if state.shared_holds > 0:
                    return True
            guard, state.guard = state.guard, None
            state.mode = None
            state.shared_holds = 0
            state.cond.notify_all()
        if guard is None or not guard.valid:
            return False
        try:
            guard.release()
        except errors.NotHolder:
            # Broken (force-released) or lost meanwhile: not ours to release.
            return False
        except errors.SessionGone:
            return False
        return True

    @_translated
    def break_(self) -> bool:
        return bool(self._coord._client().force_release(self._lock_name))

    def heartbeat(self) -> bool:
        """Whether this object still holds the lock (the session's own
        renewal, ``RaftlockDriver.heartbeat``, keeps it)."""
        return self.is_still_owner()

    def is_still_owner(self) -> bool:
        state = self._state
        if state is None or not (self._exclusive or self._shared):
            return False
        guard = state.guard
        return guard is not None and guard.valid


class RaftlockDriver(
    coordination.CoordinationDriverCachedRunWatchers,
    coordination.CoordinationDriverWithExecutor,
):
    """tooz's coordination API on a raftlock cluster (see the module's
    documentation for the URL, its options and the mapping)."""

    CHARACTERISTICS = (
        coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
        # Every read and write goes through the Raft leader.
        coordination.Characteristics.LINEARIZABLE,
        coordination.Characteristics.SAME_VIEW_UNDER_PARTITIONS,
        coordination.Characteristics.SAME_VIEW_ACROSS_CLIENTS,
    )

    def __init__(self, member_id: bytes, parsed_url: Any, options: dict[str, Any]) -> None:
        super().__init__(member_id, parsed_url, options)
        opts = utils.collapse(options)
        self._endpoints = [e for e in (parsed_url.netloc or "").split(",") if e]
        self.timeout = float(opts.get("timeout", opts.get("ttl", DEFAULT_TIMEOUT)))
        self._deadline = float(opts.get("deadline", 15.0))
        self._token = opts.get("token")
        self._tls: Optional[Tls] = None
        if opts.get("cacert") or opts.get("cert"):

            def read(path: Optional[str]) -> Optional[bytes]:
                if path is None:
                    return None
                with open(path, "rb") as f:
                    return f.read()

            self._tls = Tls(ca=read(opts.get("cacert")), cert=read(opts.get("cert")), key=read(opts.get("key")))
        self._client_name = opts.get("client_name") or "tooz:" + _as_bytes(member_id).decode("utf-8", "replace")
        self._raftlock: Optional[sync.Client] = None
        self._session: Optional[sync.Session] = None
        self._guard = threading.Lock()
        self._locks: dict[bytes, _LockState] = {}
        self._leading: dict[bytes, sync.Guard] = {}

    # -- lifecycle ----------------------------------------------------------

    def _start(self) -> None:
        if _eventlet_patched():
            raise tooz.ToozError(
                "the raftlock driver does not run under eventlet (grpcio does not support it); "
                "run the coordinator in a process that is not monkey-patched"
            )
        super()._start()
        try:
            if self._endpoints:
                client = sync.Client(
                    self._endpoints,
                    tls=self._tls,
                    token=self._token,
                    deadline=self._deadline,
                    client_name=self._client_name,
                )
            else:
                client = sync.Client.from_env(deadline=self._deadline)
        except errors.RaftlockError as e:
            utils.raise_with_cause(tooz.ToozError, str(e), cause=e)
        try:
            self._session = client.session(ttl=self.timeout, name=self._client_name, keep_alive=False)
        except errors.Unavailable as e:
            client.close()
            utils.raise_with_cause(coordination.ToozConnectionError, str(e), cause=e)
        except errors.RaftlockError as e:
            client.close()
            utils.raise_with_cause(tooz.ToozError, str(e), cause=e)
        self._raftlock = client
        self._locks = {}
        self._leading = {}

    def _stop(self) -> None:
        client, self._raftlock = self._raftlock, None
        self._session = None
        self._leading = {}
        self._locks = {}
        if client is not None:
            # Closing ends the session on the cluster: its locks, the
            # memberships left and the leaderships are released at once.
            try:
                client.close()
            except errors.RaftlockError as e:
                LOG.warning("closing the raftlock session failed (it ends at its TTL): %s", e)
        super()._stop()

    def _client(self) -> sync.Client:
        if self._raftlock is None:
            raise tooz.ToozError("the coordinator is not started")
        return self._raftlock

    def _live_session(self) -> sync.Session:
        if self._session is None:
            raise tooz.ToozError("the coordinator is not started")
        return self._session

    @_translated
    def heartbeat(self) -> float:
        """Renews the session; returns the seconds until the next renewal
        is due. A lost session is replaced by a new one (what it held is
        gone: tooz's model of a coordinator that timed out)."""
        session = self._live_session()
        try:
            session.keep_alive()
        except (errors.SessionLost, errors.SessionGone) as e:
            LOG.warning("raftlock session %d of member %r was lost (%s); opening a new one", session.id, self._member_id, e)
            fresh = self._client().session(ttl=self.timeout, name=self._client_name, keep_alive=False)
            with self._guard:
                self._session = fresh
                self._locks = {}
                self._leading = {}
            self._joined_groups.clear()
        return self.timeout / 2.0

    def _lock_state(self, name: bytes) -> _LockState:
        with self._guard:
            state = self._locks.get(name)
            if state is None:
                state = self._locks[name] = _LockState()
            return state

    def get_lock(self, name: bytes) -> RaftlockLock:
        return RaftlockLock(self, name)

    def _submit(self, fn: Callable[[], T]) -> coordination.CoordinatorResult[T]:
        return coordination.CoordinatorResult(self._executor.submit(_translated(fn)))

    # -- groups -------------------------------------------------------------

    def _group(self, group_id: bytes) -> str:
        return GROUPS + _encode(group_id)

    def _members(self, group_id: bytes) -> dict[bytes, Grant]:
        d = self._client().describe(self._group(group_id))
        if not d.resized:
            raise coordination.GroupNotCreated(group_id)
        members: dict[bytes, Grant] = {}
        for g in d.holders:
            member, _ = _member_of(g)
            if member is not None:
                members[member] = g
        return members

    def create_group(self, group_id: bytes) -> coordination.CoordinatorResult[None]:
        def create() -> None:
            name = self._group(group_id)
            if self._client().describe(name).resized:
                raise coordination.GroupAlreadyExist(group_id)
            self._client().resize(name, GROUP_PERMITS)

        return self._submit(create)

    def get_groups(self) -> coordination.CoordinatorResult[list[bytes]]:
        def groups() -> list[bytes]:
            return [
                _decode(lock.name[len(GROUPS):])
                for lock in self._client().list_locks(GROUPS)
                if lock.resized
            ]

        return self._submit(groups)

    def delete_group(self, group_id: bytes) -> coordination.CoordinatorResult[None]:
        def delete() -> None:
            if self._members(group_id):
                raise coordination.GroupNotEmpty(group_id)
            self._client().resize(self._group(group_id), 0)

        return self._submit(delete)

    def join_group(
        self, group_id: bytes, capabilities: Any = b""
    ) -> coordination.CoordinatorResult[None]:
        def join() -> None:
            me = _as_bytes(self._member_id)
            if me in self._members(group_id):
                raise coordination.MemberAlreadyExist(group_id, self._member_id)
            # tooz's default, b"", means none: answered as None.
            record = utils.dumps(
                {"member_id": me, "capabilities": None if capabilities in (b"", "") else capabilities}
            )
            try:
                guard = self._live_session().try_lock(self._group(group_id), shared=True, metadata=record)
            except errors.AlreadyHeld as e:
                # This coordinator's session is a member already.
                raise coordination.MemberAlreadyExist(group_id, self._member_id) from e
            if guard is None:
                raise tooz.ToozError(f"group {group_id!r} has no room for another member")
            self._joined_groups.add(group_id)

        return self._submit(join)

    def leave_group(self, group_id: bytes) -> coordination.CoordinatorResult[None]:
        def leave() -> None:
            grant = self._members(group_id).get(_as_bytes(self._member_id))
            if grant is None:
                raise coordination.MemberNotJoined(group_id, self._member_id)
            try:
                # Whichever session of this identity holds it: a member id
                # that leaves from a second coordinator boots the first out.
                self._client().release(grant)
            except errors.NotHolder:
                pass
            self._joined_groups.discard(group_id)

        return self._submit(leave)

    def get_members(self, group_id: bytes) -> coordination.CoordinatorResult[set[bytes]]:
        return self._submit(lambda: set(self._members(group_id)))

    def _member(self, group_id: bytes, member_id: bytes) -> tuple[Grant, Any]:
        grant = self._members(group_id).get(_as_bytes(member_id))
        if grant is None:
            raise coordination.MemberNotJoined(group_id, member_id)
        return grant, _member_of(grant)[1]

    def get_member_capabilities(
        self, group_id: bytes, member_id: bytes
    ) -> coordination.CoordinatorResult[Any]:
        return self._submit(lambda: self._member(group_id, member_id)[1])

    def get_members_with_capabilities(
        self, group_id: bytes
    ) -> coordination.CoordinatorResult[dict[bytes, Any]]:
        def members() -> dict[bytes, Any]:
            return {m: _member_of(g)[1] for m, g in self._members(group_id).items()}

        return self._submit(members)

    def get_member_info(
        self, group_id: bytes, member_id: bytes
    ) -> coordination.CoordinatorResult[dict[str, Any]]:
        def info() -> dict[str, Any]:
            grant, capabilities = self._member(group_id, member_id)
            joined = datetime.datetime.fromtimestamp(grant.granted_at_ms / 1000.0, datetime.timezone.utc)
            return {
                "capabilities": capabilities,
                "created_at": joined.isoformat(),
                # Capabilities are set when a member joins, never after.
                "updated_at": joined.isoformat(),
                "fencing_token": grant.token,
            }

        return self._submit(info)

    def update_capabilities(self, group_id: bytes, capabilities: Any) -> coordination.CoordinatorResult[None]:
        raise tooz.NotImplemented(
            "raftlock sets a member's capabilities when it joins (a grant's metadata); "
            "leave the group and join it again with the new ones"
        )

    # -- leaders ------------------------------------------------------------

    def _leader_lock(self, group_id: bytes) -> str:
        return LEADERS + _encode(group_id)

    # tooz declares bytes, but its suite (and its other drivers) answer
    # None for a group nobody leads.
    def get_leader(self, group_id: bytes) -> coordination.CoordinatorResult[Optional[bytes]]:  # type: ignore[override]
        def leader() -> Optional[bytes]:
            holders = self._client().describe(self._leader_lock(group_id)).holders
            return holders[0].metadata if holders else None

        return self._submit(leader)

    def stand_down_group_leader(self, group_id: bytes) -> bool:
        with self._guard:
            guard = self._leading.pop(group_id, None)
        if guard is None or not guard.valid:
            return False
        try:
            guard.release()
        except (errors.NotHolder, errors.SessionGone):
            return False
        return True

    def run_elect_coordinator(self) -> None:
        self._elect()

    @_translated
    def _elect(self) -> list[Any]:
        """Tries to take the leadership of every group this coordinator
        runs for and does not lead yet; runs the hooks of those it wins
        and returns what they returned."""
        results: list[Any] = []
        for group_id, hooks in list(self._hooks_elected_leader.items()):
            held = self._leading.get(group_id)
            if held is not None and held.valid:
                continue
            guard = self._live_session().try_lock(
                self._leader_lock(group_id), metadata=_as_bytes(self._member_id)
            )
            if guard is None:
                continue
            with self._guard:
                self._leading[group_id] = guard
            results.extend(hooks.run(coordination.LeaderElected(group_id, self._member_id)))
        return results

    def run_watchers(self, timeout: Optional[float] = None) -> list[Any]:
        results = super().run_watchers(timeout)
        results.extend(self._elect())
        return results
