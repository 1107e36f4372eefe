"""Snapshots: running sandboxes saved whole (memory, processes and disk).

    from withruntime import Sandbox, Snapshot

    with Sandbox.create() as sbx:
        sbx.run_code("x = 41")
        snap = sbx.snapshot()                      # the sandbox keeps running
        forks = sbx.fork(2)                        # two sandboxes going on from here
    with Sandbox.create(snapshot=snap.id) as again:
        print(again.run_code("x + 1").text)        # 42
    snap.delete()

A snapshot is kept until its ``expires_at`` (the server's retention) or
until it is deleted; its ``size_bytes`` counts in the account's storage
quota. ``Snapshot.list/get`` follow the Go client (ListSnapshots,
GetSnapshot).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, List

from ._time import parse_time
from ._transport import Transport

__all__ = ["Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """A snapshot as the API shows it: ``id`` (``snap_...``), the caller's
    label ``name``, the ``sandbox_id`` it was taken of, that sandbox's
    ``isolation``, ``template``, ``vcpus`` and ``memory_mib`` (which a
    sandbox started from it takes), ``size_bytes`` on disk, ``created_at``,
    ``expires_at`` (when retention removes it) and ``freeze_ms`` (how long
    the sandbox did not answer while it was taken). ``raw`` keeps the whole
    JSON object."""

    id: str
    name: str = ""
    sandbox_id: str = ""
    isolation: str = ""
    template: str = ""
    vcpus: int = 0
    memory_mib: int = 0
    size_bytes: int = 0
    created_at: datetime | None = None
    expires_at: datetime | None = None
    freeze_ms: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _t: Transport | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], _t: Transport | None = None) -> Snapshot:
        return cls(
            id=str(d.get("id", "")),
            name=str(d.get("name") or ""),
            sandbox_id=str(d.get("sandbox_id") or ""),
            isolation=str(d.get("isolation") or ""),
            template=str(d.get("template") or ""),
            vcpus=int(d.get("vcpus") or 0),
            memory_mib=int(d.get("memory_mib") or 0),
            size_bytes=int(d.get("size_bytes") or 0),
            created_at=parse_time(d.get("created_at")),
            expires_at=parse_time(d.get("expires_at")),
            freeze_ms=int(d.get("freeze_ms") or 0),
            raw=dict(d),
            _t=_t,
        )

    @classmethod
    def list(cls, *, api_key: str | None = None, base_url: str | None = None) -> List[Snapshot]:
        """The account's snapshots, newest first."""
        t = Transport(base_url, api_key)
        d = t.json("GET", "/snapshots") or {}
        return [cls.from_json(s, t) for s in d.get("snapshots") or []]

    @classmethod
    def get(cls, id: str, *, api_key: str | None = None, base_url: str | None = None) -> Snapshot:
        """Snapshot ``id``; APIError not_found when the account has none."""
        t = Transport(base_url, api_key)
        return cls.from_json(t.json("GET", _path(id)) or {}, t)

    def delete(self) -> None:
        """Remove the snapshot; sandboxes started from it run on."""
        (self._t or Transport(None, None)).json("DELETE", _path(self.id))


def _path(id: str) -> str:
    if not id:
        raise ValueError("snapshot id is empty")
    return "/snapshots/" + urllib.parse.quote(id, safe="")
