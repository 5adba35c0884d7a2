"""schemathesis hooks for raftlock's HTTP/JSON API, loaded through
SCHEMATHESIS_HOOKS by tests/schemathesis/run.sh. Three things the OpenAPI
document cannot say by itself:

* Byte bounds. Names are at most 512 bytes of UTF-8 and client names 256;
  JSON Schema counts characters. Valid cases are cut to the byte bound.
* Rules across fields, which the field comments state and JSON Schema cannot:
  an exclusive hold takes one permit and only it may set a lock-delay; an
  unnumbered acquire (`seq` 0) sends no acknowledgements, and a numbered one
  acknowledges nothing at or above its own `seq`; a take asks for no more
  than the burst of the limit it defines; a limit's burst refills within
  2^62 ns. Cases generated as valid are brought within them before they are
  sent; cases generated as invalid are sent as they are.
* Streams. `/v1/lock/watch` and `/v1/election/observe` last until the caller
  goes away, so valid cases carry a short `timeoutMs`, and every wait a
  valid case asks for is kept short, so that a run ends. Their answers are
  newline-delimited JSON, which the deserializer below checks line by line.
* Which 503s are answers. A 503 tells a client to try again, another node
  or later: the node no longer leads (NOT_LEADER), or it leads but no quorum
  has acknowledged it for a leader lease (NO_QUORUM), which a debug build on
  a loaded two-core machine can go through for a moment. schemathesis.toml
  lets those through schemathesis's own server-error check; the check below
  fails every other 503.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis import Response

# Short enough that a run of thousands of cases ends; long enough that a
# stream sends its first items.
STREAM_MS = 300
WAIT_MS = 200


# Fields whose bound is in bytes of UTF-8 where the schema counts characters.
BYTE_BOUNDS = {"name": 512, "prefix": 512, "clientName": 256, "host": 256}


def _cut(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore") or text[:1]


def _u64(value: Any) -> int:
    """A 64-bit field as proto3 JSON reads it: a decimal string or a number."""
    if value is None:
        return 0
    return int(value)


def _keep_within_rules(path: str, body: dict[str, Any], query: dict[str, Any]) -> None:
    for field, max_bytes in BYTE_BOUNDS.items():
        if isinstance(body.get(field), str):
            body[field] = _cut(body[field], max_bytes)
    if path in ("/v1/lock/watch", "/v1/election/observe"):
        ms = query.get("timeoutMs")
        if not isinstance(ms, int) or ms > STREAM_MS:
            query["timeoutMs"] = STREAM_MS
    if "waitTimeoutMs" in body and body["waitTimeoutMs"] is not None:
        if _u64(body["waitTimeoutMs"]) > WAIT_MS:
            body["waitTimeoutMs"] = str(WAIT_MS)
    elif path == "/v1/election/campaign":
        # A campaign with no timeout waits until elected.
        body["waitTimeoutMs"] = str(WAIT_MS)
    if path == "/v1/lock/acquire":
        shared = body.get("mode") == "LOCK_MODE_SHARED"
        if not shared and _u64(body.get("count")) > 1:
            body["count"] = 1
        if shared and _u64(body.get("lockDelayMs")) != 0:
            body["lockDelayMs"] = "0"
    if "seq" in body or "ackedBelow" in body or "inFlight" in body:
        seq = _u64(body.get("seq"))
        if seq == 0:
            body.pop("ackedBelow", None)
            body.pop("inFlight", None)
        elif _u64(body.get("ackedBelow")) > seq:
            body["ackedBelow"] = str(seq)
    limit = body.get("limit")
    if isinstance(limit, dict):
        # An unset period is a second, an unset burst one token.
        rate = _u64(limit.get("rate"))
        per_ms = _u64(limit.get("perMs")) or 1000
        burst = _u64(limit.get("burst")) or 1
        if rate:
            interval_ns = per_ms * 1_000_000 // rate
            if burst * interval_ns > 1 << 62:
                burst = max(1, (1 << 62) // max(interval_ns, 1))
                limit["burst"] = str(burst)
        if path == "/v1/ratelimit/take" and _u64(body.get("n")) > burst:
            body["n"] = str(burst)


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    if case.query is None:
        case.query = {}
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        # An invalid case may still open a stream the server accepts (one
        # whose invalid part the server reads leniently): it must end too.
        if case.operation.path in ("/v1/lock/watch", "/v1/election/observe"):
            ms = case.query.setdefault("timeoutMs", STREAM_MS)
            if isinstance(ms, int) and STREAM_MS < ms <= 3_600_000:
                case.query["timeoutMs"] = STREAM_MS
        return
    if isinstance(case.body, dict):
        _keep_within_rules(case.operation.path, case.body, case.query)
    elif case.operation.path in ("/v1/lock/watch", "/v1/election/observe"):
        _keep_within_rules(case.operation.path, {}, case.query)


# The reasons a 503 may carry in this run: the node it reached cannot
# serve now and says so; every client of this project retries on it.
RETRY_ELSEWHERE = frozenset({"NOT_LEADER", "NO_QUORUM"})


@schemathesis.check
def unavailable_only_when_another_node_may_serve(ctx: Any, response: Response, case: Any) -> None:
    """A 503 is a server error unless its reason is in RETRY_ELSEWHERE."""
    if response.status_code != 503:
        return None
    try:
        reason = json.loads(response.content).get("reason")
    except (ValueError, AttributeError):
        reason = None
    if reason not in RETRY_ELSEWHERE:
        raise AssertionError(f"503 with reason {reason!r}, not one of {sorted(RETRY_ELSEWHERE)}")
    return None


@schemathesis.deserializer("application/x-ndjson")
def ndjson(ctx: Any, response: Response) -> Any:
    """One line of the stream for schemathesis to check; the deserializer
    checks the others itself, each as a one-line answer of its own."""
    if response.content and not response.content.endswith(b"\n"):
        raise ValueError("the stream's last line does not end with a newline")
    lines = [line for line in response.content.decode("utf-8").split("\n") if line]
    items = [json.loads(line) for line in lines]
    for index, item in enumerate(items[:-1]):
        if isinstance(item, dict) and "error" in item:
            raise ValueError(f"line {index + 1} is an error, yet the stream goes on after it")
    for index, line in enumerate(lines[1:], start=2):
        one = Response(
            status_code=response.status_code,
            headers={"content-type": ["application/x-ndjson"]},
            content=(line + "\n").encode("utf-8"),
            request=response.request,
            elapsed=response.elapsed,
            verify=response.verify,
        )
        try:
            ctx.operation.validate_response(one)
        except Exception as exc:  # noqa: BLE001 - reported with the line it is about
            raise ValueError(f"line {index} of the stream: {exc}") from exc
    if not items:
        # The stream ended (its timeoutMs) before anything happened: an
        # empty stream is a valid one. `{}` is the message with every
        # field unset, which every stream item's schema admits.
        return {}
    return items[0]
