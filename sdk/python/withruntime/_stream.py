"""Reading an ndjson event stream (exec, code): one JSON object a line,
ending with one of a few terminal events.

Shared by exec and run_code so that both treat a broken stream, a
malformed line and the platform's "error" event alike.
"""

from __future__ import annotations

import http.client
import json
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .errors import TransportError, api_error_from_detail

if TYPE_CHECKING:
    from ._transport import Transport

# At most this much of what follows a terminal event is read; past it the
# connection is closed instead of reused.
_DRAIN_LIMIT = 64 * 1024


class _Same:
    """Marks "the header wait is bounded as each read is"."""


_SAME = _Same()


def events(
    transport: Transport,
    path: str,
    body: dict[str, Any],
    *,
    terminal: frozenset[str],
    where: str,
    read_timeout: float | None,
    max_line: int,
    header_timeout: float | None | _Same = _SAME,
    query: Mapping[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """POST body to path (GET path?query when body is None: a follow
    stream) and yield each event of the answer's stream.

    An event whose type is in ``terminal`` is the last one yielded: after
    it the rest of the body is drained (so the connection can be reused) and
    the iteration ends. An "error" event raises the APIError it carries; a
    stream that breaks, or ends before a terminal event, raises
    TransportError, as does a line longer than ``max_line`` bytes (a
    server that never ends a line must not fill the memory). Keep iterating
    after the terminal event (do not return from inside the loop) so the
    connection goes back to the pool.

    ``read_timeout`` bounds each read of the body (None: none);
    ``header_timeout`` the wait for the answer's headers (default: the
    same).
    """
    first = read_timeout if isinstance(header_timeout, _Same) else header_timeout
    method = "POST" if body is not None else "GET"
    with transport.stream(method, path, json_body=body, query=query, timeout=first, body_timeout=read_timeout) as resp:
        if resp.status != 200:
            raise TransportError(f"{where}: expected a 200 event stream, got status {resp.status}")
        while True:
            try:
                line = resp.readline(max_line + 1)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"{where}: the event stream broke: {type(e).__name__}: {e}") from e
            if len(line) > max_line:
                raise TransportError(f"{where}: an event line is longer than {max_line} bytes")
            if not line:
                ends = " or ".join(sorted(terminal))
                raise TransportError(f"{where}: the event stream ended without an {ends} event")
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise TransportError(f"{where}: malformed event {line[:200]!r}") from e
            if not isinstance(ev, dict):
                raise TransportError(f"{where}: malformed event {line[:200]!r}")
            if ev.get("type") == "error":
                raise api_error_from_detail(ev.get("error"))
            yield ev
            if ev.get("type") in terminal:
                _drain(resp)
                return


def timeout_ms_of(value: Any) -> int | None:
    """A request's ``timeout_ms`` as the wire takes it: None or 0 for none,
    else a whole number of milliseconds, rounded up (0.5 must not become
    0, which means no timeout at all)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"timeout_ms must be a number, not {type(value).__name__}")
    if not value >= 0 or value == math.inf:
        raise ValueError(f"timeout_ms must be a positive number of milliseconds, not {value!r}")
    return math.ceil(value) if value > 0 else 0


def _drain(resp: http.client.HTTPResponse) -> None:
    """Read what follows the terminal event (nothing, normally) so the
    connection can be reused: at most _DRAIN_LIMIT bytes, since a server
    may send without end; a body not read to its end leaves the connection
    closed (Transport.stream). A failure here does not matter, the result
    is complete."""
    try:
        resp.read(_DRAIN_LIMIT)
    except (OSError, http.client.HTTPException):
        pass
