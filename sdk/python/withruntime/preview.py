"""Preview URLs: reaching a sandbox's ports over HTTP (``sbx.get_host()``,
``sbx.preview_url()``, ``sbx.expose()``, ``sbx.revoke_previews()``)."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Union

from ._time import parse_time
from ._transport import Transport

__all__ = ["Preview", "PREVIEW_TOKEN_HEADER", "PREVIEW_TOKEN_PARAM"]

# A preview token travels in this header, or as this query parameter of a
# signed URL (the server then sets a cookie and redirects to the URL
# without it). Neither reaches the sandbox.
PREVIEW_TOKEN_HEADER = "X-Withruntime-Preview-Token"
PREVIEW_TOKEN_PARAM = "withruntime_preview_token"

ExpiresIn = Union[int, float, timedelta, None]


@dataclass(frozen=True)
class Preview:
    """How to reach one port of a sandbox over HTTP (the API's Preview).

    ``path`` is the port's path on the API (join it with the base URL);
    ``host`` and ``url`` its host form (``{port}-{id}.{domain}``), empty
    unless the server serves previews by host name. ``token`` (empty when
    the port is public) is valid for this sandbox and port only, until
    ``expires_at``; send it as the ``X-Withruntime-Preview-Token`` header,
    or use :meth:`Sandbox.preview_url`.
    """

    port: int
    public: bool = False
    path: str = ""
    host: str = ""
    url: str = ""
    token: str = ""
    expires_at: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Preview:
        return cls(
            port=int(d.get("port") or 0),
            public=bool(d.get("public")),
            path=str(d.get("path") or ""),
            host=str(d.get("host") or ""),
            url=str(d.get("url") or ""),
            token=str(d.get("token") or ""),
            expires_at=parse_time(d.get("expires_at")),
            raw=dict(d),
        )


def check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int, got {type(port).__name__}")
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not a TCP port (1 to 65535)")
    return port


def expires_seconds(expires_in: ExpiresIn) -> int | None:
    """Whole seconds, rounded up (a token never lives less than asked)."""
    if expires_in is None:
        return None
    if isinstance(expires_in, timedelta):
        expires_in = expires_in.total_seconds()
    if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)):
        raise TypeError(f"expires_in is seconds or a timedelta, got {type(expires_in).__name__}")
    if expires_in <= 0:
        raise ValueError(f"expires_in must be positive, got {expires_in}")
    return math.ceil(expires_in)


def get_preview(t: Transport, sandbox_id: str, port: int, expires_in: ExpiresIn = None) -> Preview:
    d = t.json(
        "GET",
        f"/sandboxes/{sandbox_id}/previews/{check_port(port)}",
        query={"expires_in": expires_seconds(expires_in)},
    )
    return Preview.from_json(d or {})


def set_preview(t: Transport, sandbox_id: str, port: int, public: bool) -> Preview:
    d = t.json("PUT", f"/sandboxes/{sandbox_id}/previews/{check_port(port)}", json_body={"public": bool(public)})
    return Preview.from_json(d or {})


def revoke_previews(t: Transport, sandbox_id: str) -> None:
    t.json("POST", f"/sandboxes/{sandbox_id}/previews/revoke")


def host_of(t: Transport, p: Preview) -> str:
    """E2B's shape: ``{port}-{id}.{domain}[:port]`` where the server has a
    preview domain, else the API's ``host:port/v1/sandboxes/{id}/ports/{port}``
    (so that ``f"http://{host}/path"`` works either way)."""
    if p.host:
        return p.host
    base = urllib.parse.urlsplit(t.base_url)
    return base.netloc + base.path.rstrip("/") + p.path.rstrip("/")


def url_of(t: Transport, p: Preview) -> str:
    """The URL that opens p in a browser: its host form or its path on the
    base URL, signed with its token unless the port is public."""
    u = p.url or (t.base_url.rstrip("/") + p.path)
    if not p.token:
        return u
    sep = "&" if urllib.parse.urlsplit(u).query else "?"
    return u + sep + urllib.parse.urlencode({PREVIEW_TOKEN_PARAM: p.token})
