"""A sandbox's egress policy and its egress log (``sbx.network()``,
``sbx.set_network()``, ``sbx.egress()``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._time import parse_time

__all__ = ["Network", "EgressEvent"]


@dataclass(frozen=True)
class Network:
    """A sandbox's egress policy (the API's Network): nothing without
    ``internet``; with it every public address, or only the names in
    ``allow`` (exact, or ``*.`` and a domain for every name under it)."""

    internet: bool = False
    allow: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Network:
        return cls(internet=bool(d.get("internet")), allow=[str(h) for h in d.get("allow") or []])

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"internet": self.internet}
        if self.allow:
            body["allow"] = list(self.allow)
        return body


def network_body(internet: bool, allow: Sequence[str] | None) -> dict[str, Any]:
    """The body of PUT /v1/sandboxes/{id}/network."""
    if isinstance(allow, str):
        raise TypeError("allow is a list of host names, not a str")
    return Network(bool(internet), [str(h) for h in allow or []]).to_json()


@dataclass(frozen=True)
class EgressEvent:
    """One connection or DNS query of a sandbox (the API's EgressEvent).

    ``kind`` is what was seen (``dns``, ``tcp``, ``tls``, ``http``, ...),
    ``name`` the name asked for (DNS query, TLS server name, HTTP Host),
    ``address`` and ``port`` the destination, ``verdict`` ``allowed`` or
    ``refused`` and ``reason`` why, for people. Empty where the server gave
    none.
    """

    time: datetime | None
    kind: str
    verdict: str
    name: str = ""
    address: str = ""
    port: int = 0
    reason: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EgressEvent:
        return cls(
            time=parse_time(d.get("time")),
            kind=str(d.get("kind") or ""),
            verdict=str(d.get("verdict") or ""),
            name=str(d.get("name") or ""),
            address=str(d.get("address") or ""),
            port=int(d.get("port") or 0),
            reason=str(d.get("reason") or ""),
        )
