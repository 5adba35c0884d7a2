"""The streams a client shares between its calls: one ``Lock.Pipeline``
stream per node for every acquire and release (whose failures read as the
unary call's would), and one keep-alive stream for all its sessions.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional

import grpc

from . import errors
from ._types import LEADER_METADATA_KEY, _stub
from .errors import SessionGone, SessionLost
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

if TYPE_CHECKING:
    from ._client import Client
    from ._session import Session


class _PipelineFailure(grpc.RpcError):
    """A call on a Pipeline stream that ended as its unary call would have:
    the same code, message, reason and leader hint."""

    def __init__(
        self, code: grpc.StatusCode, message: str, reason: str = "", leader: str = ""
    ) -> None:
        super().__init__(message)
        self._code = code
        self._message = message
        self.raftlock_reason = reason
        self._leader = leader

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._message

    def trailing_metadata(self) -> Any:
        return ((LEADER_METADATA_KEY, self._leader),) if self._leader else ()


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _expire(fut: "asyncio.Future[pb.PipelineResponse]") -> None:
    if not fut.done():
        # As a unary call's own deadline: no verdict, so the call is retried.
        fut.set_exception(_PipelineFailure(grpc.StatusCode.DEADLINE_EXCEEDED, "pipeline call timed out"))


class _Pipeline:
    """One bidirectional ``Lock.Pipeline`` stream to a node, shared by all
    of a client's acquires and releases there: each call is a message with
    an id, answered in completion order. A node without the method gets
    unary calls from then on."""

    def __init__(self, client: Client, ch: grpc.aio.Channel, key: int) -> None:
        self.client = client
        self.key = key
        self.broken = False
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[pb.PipelineResponse]] = {}
        self.write_lock = asyncio.Lock()
        self.stream: Any = _stub(rpc.LockStub, ch).Pipeline(metadata=client._metadata())
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        failure: BaseException
        try:
            while True:
                resp = await self.stream.read()
                if resp is grpc.aio.EOF:  # type: ignore[attr-defined]
                    failure = _PipelineFailure(grpc.StatusCode.UNAVAILABLE, "pipeline stream ended")
                    break
                fut = self.pending.pop(resp.id, None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.client._unary_only.add(self.key)
            failure = e
        except asyncio.CancelledError:
            failure = _PipelineFailure(grpc.StatusCode.CANCELLED, "pipeline closed")
        self.broken = True
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(failure)
        self.pending.clear()

    async def call(self, req: pb.PipelineRequest, timeout: float) -> pb.PipelineResponse:
        if self.broken:
            raise _PipelineFailure(grpc.StatusCode.UNAVAILABLE, "pipeline stream broken")
        self.next_id += 1
        req.id = self.next_id
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[pb.PipelineResponse] = loop.create_future()
        self.pending[req.id] = fut
        # A timer, not wait_for: it costs no task per call.
        timer = loop.call_later(timeout, _expire, fut)
        try:
            async with self.write_lock:
                await self.stream.write(req)
            resp = await fut
        except grpc.RpcError:
            raise
        except Exception as e:  # a write on a stream that just broke
            raise _PipelineFailure(grpc.StatusCode.UNAVAILABLE, f"pipeline stream broken: {e}") from None
        finally:
            timer.cancel()
            self.pending.pop(req.id, None)
        if resp.HasField("error"):
            err = resp.error
            raise _PipelineFailure(
                _CODES.get(err.code, grpc.StatusCode.UNKNOWN), err.message, err.reason, err.leader
            )
        return resp

    async def close(self) -> None:
        self.broken = True
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, Exception):
            pass
        self.stream.cancel()


class _KeepAlives:
    """One keep-alive stream for all of a client's sessions, as etcd's
    clients share one LeaseKeepAlive stream. Each session is renewed every
    TTL/3 from the send time of its last acknowledged renewal."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.sessions: dict[int, Session] = {}
        self.first_due: dict[int, float] = {}
        self.task: Optional[asyncio.Task[None]] = None

    def add(self, s: Session, sent: float) -> None:
        self.sessions[s.id] = s
        self.first_due[s.id] = sent + s.ttl / 3
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        due: dict[int, float] = {}
        backoff = 0.05
        while self.sessions:
            addr = self.client._target()
            queue: asyncio.Queue[Optional[pb.KeepAliveRequest]] = asyncio.Queue()
            pending: dict[int, float] = {}

            async def requests() -> AsyncIterator[pb.KeepAliveRequest]:
                while True:
                    r = await queue.get()
                    if r is None:
                        return
                    yield r

            interval = min((s.ttl / 3 for s in self.sessions.values()), default=1.0)
            patience = min(interval, 2.0)
            call = _stub(rpc.SessionStub, self.client._channel(addr)).KeepAlive(
                requests(), metadata=self.client._metadata()
            )

            async def reader() -> None:
                async for resp in call:
                    sent = pending.pop(resp.session_id, None)
                    s = self.sessions.get(resp.session_id)
                    if sent is None or s is None:
                        continue
                    if resp.gone:
                        s._end(SessionGone(f"session {s.id} is gone (expired or closed)"))
                    else:
                        s._acknowledged(sent)
                        due[s.id] = sent + s.ttl / 3
                    self.client._leader = addr

            read = asyncio.get_running_loop().create_task(reader())
            try:
                while self.sessions and not read.done():
                    now = time.monotonic()
                    if any(now - sent > patience for sent in pending.values()):
                        # Frozen, partitioned or deposed: try elsewhere.
                        if self.client._leader == addr:
                            self.client._leader = None
                        break
                    for sid, s in list(self.sessions.items()):
                        if sid not in due:
                            due[sid] = self.first_due.pop(sid, now)
                        if not s.valid:
                            s._end(SessionLost(f"session {sid} lost: no keep-alive acknowledged in time"))
                            continue
                        if due[sid] <= now and sid not in pending:
                            pending[sid] = now
                            queue.put_nowait(pb.KeepAliveRequest(session_id=sid, shared=True))
                    await asyncio.sleep(0.05)
                if read.done() and read.exception() is not None:
                    exc = read.exception()
                    if isinstance(exc, grpc.RpcError):
                        err = errors.from_rpc_error(exc)
                        if isinstance(err, (errors.Unauthenticated, errors.PermissionDenied)):
                            # No renewal can succeed with these credentials.
                            for s in list(self.sessions.values()):
                                s._end(SessionLost(f"session {s.id} cannot be renewed: {err}", err.reason, err.code))
                            return
                        self.client._learn(addr, exc)
                elif read.done():
                    # The server ended the stream (stepping down).
                    if self.client._leader == addr:
                        self.client._leader = None
            finally:
                queue.put_nowait(None)
                read.cancel()
                call.cancel()
            # Whatever was in flight died with the stream: everything is due.
            now = time.monotonic()
            for sid in self.sessions:
                due[sid] = now
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, max(0.05, min(interval / 4, 0.25)))
