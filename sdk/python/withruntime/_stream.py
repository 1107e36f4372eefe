"""Reading an ndjson event stream (exec, code): one JSON object a line,
ending with one of a few terminal events.

Shared by exec and run_code so that both treat a broken stream, a
malformed line and the platform's "error" event alike.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import TransportError, api_error_from_detail

if TYPE_CHECKING:
    from ._transport import Transport


def events(
    transport: Transport,
    path: str,
    body: dict[str, Any],
    *,
    terminal: frozenset[str],
    where: str,
    read_timeout: float | None,
) -> Iterator[dict[str, Any]]:
    """POST body to path and yield each event of the answer's stream.

    An event whose type is in ``terminal`` is the last one yielded: after
    it the rest of the body is drained (so the connection can be reused) and
    the iteration ends. An "error" event raises the APIError it carries; a
    stream that breaks, or ends before a terminal event, raises
    TransportError. Keep iterating after the terminal event (do not return
    from inside the loop) so the connection goes back to the pool.
    """
    with transport.stream("POST", path, json_body=body, timeout=read_timeout) as resp:
        if resp.status != 200:
            raise TransportError(f"{where}: expected a 200 event stream, got status {resp.status}")
        while True:
            try:
                line = resp.readline()
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"{where}: the event stream broke: {type(e).__name__}: {e}") from e
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


def _drain(resp: http.client.HTTPResponse) -> None:
    """Read what follows the terminal event (nothing, normally) so the
    connection can be reused; a failure here does not matter, the result is
    complete."""
    try:
        resp.read()
    except (OSError, http.client.HTTPException):
        pass
