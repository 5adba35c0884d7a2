"""The asyncio client: sessions kept alive in the background, locks with
fencing tokens, elections. The synchronous API (:mod:`raftlock.sync`) runs
this same code on a loop of its own.

Example (against ``raftlockd dev``)::

    import asyncio, raftlock

    async def main() -> None:
        async with raftlock.Client("127.0.0.1:7000,127.0.0.1:7001") as client:
            async with await client.session(ttl=10) as session:
                async with session.lock("payments/settle", timeout=5) as guard:
                    print("token", guard.token)   # pass it to every write

    asyncio.run(main())
"""

from __future__ import annotations

# The client is split by concept, one module each; this module is the public
# face, with every name it had when it held them all.
from ._client import (
    ENV_AUTH_TOKEN,
    ENV_CACERT,
    ENV_CERT,
    ENV_CLIENT_NAME,
    ENV_ENDPOINTS,
    ENV_KEY,
    Client,
)
from ._client import _settings_from_env as _settings_from_env  # raftlock.sync reads it
from ._elections import Leadership
from ._locks import Guard, LockRequest, LockSet, LockSetRequest
from ._ratelimit import Admission, LimitInfo, RateLimit, TokenLease
from ._session import Session
from ._types import (
    LEADER_METADATA_KEY,
    MAX_WAIT,
    Description,
    Grant,
    LockSummary,
    Tls,
    Waiter,
    safety_margin,
)

__all__ = [
    "Client",
    "Session",
    "LockRequest",
    "LockSetRequest",
    "LockSet",
    "Guard",
    "Leadership",
    "RateLimit",
    "TokenLease",
    "Admission",
    "LimitInfo",
    "Tls",
    "Grant",
    "Waiter",
    "Description",
    "LockSummary",
    "safety_margin",
    "LEADER_METADATA_KEY",
    "MAX_WAIT",
    "ENV_ENDPOINTS",
    "ENV_CACERT",
    "ENV_CERT",
    "ENV_KEY",
    "ENV_AUTH_TOKEN",
    "ENV_CLIENT_NAME",
]
