"""Leadership of an election, won with :meth:`Session.campaign`: the
leader's fencing token, publishing a new value, and stepping down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from . import errors
from ._types import _stub
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

if TYPE_CHECKING:
    from ._session import Session


class Leadership:
    """Leadership of an election: ``token`` fences the leader's actions;
    ``proclaim`` publishes a new value; ``resign`` steps down."""

    def __init__(self, session: Session, election: str, token: int) -> None:
        self.session = session
        self.election = election
        self.token = token
        self._resigned = False

    async def __aenter__(self) -> "Leadership":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.resign()

    @property
    def valid(self) -> bool:
        """Whether this is still the leader's to act on."""
        return not self._resigned and self.session.valid

    async def proclaim(self, value: bytes) -> None:
        """Publishes ``value`` as the leader's."""
        s = self.session

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> object:
            return await _stub(rpc.ElectionStub, ch).Proclaim(
                pb.ProclaimRequest(name=self.election, session_id=s.id, token=self.token, value=value),
                timeout=t,
                metadata=md,
            )

        await s.client._call(call)

    async def resign(self) -> None:
        """Steps down; the next candidate is elected in the same step."""
        if self._resigned:
            return
        self._resigned = True
        if not self.session.valid:
            return
        s = self.session
        attempts = 0

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> object:
            nonlocal attempts
            attempts += 1
            return await _stub(rpc.ElectionStub, ch).Resign(
                pb.ResignRequest(name=self.election, session_id=s.id, token=self.token),
                timeout=t,
                metadata=md,
            )

        try:
            await s.client._call(call)
        except errors.NotHolder:
            # Only a retry may find the leadership already given up.
            if attempts < 2:
                raise
