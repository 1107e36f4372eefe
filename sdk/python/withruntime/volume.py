"""Volumes: named persistent storage that outlives sandboxes.

    from withruntime import Sandbox, Volume

    vol = Volume.create("data", size_gib=1)
    vol.write_file("/config.json", b"{}")
    with Sandbox.create(volumes=[{"name": "data", "path": "/data"}]) as sbx:
        sbx.exec("ls /data", check=True)
    print(vol.read_file("/config.json"))
    vol.delete()

Any number of sandboxes mount a volume read-only (``"read_only": True``);
one at a time writable (a second writer is refused with conflict). Writes
past ``size_gib`` fail inside with ENOSPC. Paths inside a volume are
absolute (``"/"`` is its root). gVisor sandboxes only, for now.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, List, Optional, Union

from ._time import parse_time
from ._transport import Transport

__all__ = ["Volume", "VolumeEntry"]


@dataclass(frozen=True)
class VolumeEntry:
    """One name in a volume's directory: ``type`` is ``"file"``,
    ``"dir"``, ``"symlink"`` or ``"other"``."""

    name: str
    type: str
    size: int = 0


@dataclass
class Volume:
    """A named volume of the key's account, as the API shows it."""

    name: str
    size_gib: int
    used_bytes: int = 0
    created_at: Optional[datetime] = None
    mounted_by: List[str] = field(default_factory=list)
    _t: Optional[Transport] = field(default=None, repr=False, compare=False)

    @classmethod
    def _from_json(cls, d: Any, t: Transport) -> "Volume":
        d = d or {}
        return cls(
            name=d.get("name", ""),
            size_gib=int(d.get("size_gib", 0)),
            used_bytes=int(d.get("used_bytes", 0)),
            created_at=parse_time(d.get("created_at")),
            mounted_by=list(d.get("mounted_by") or []),
            _t=t,
        )

    @staticmethod
    def _path(name: str, suffix: str = "") -> str:
        if not name:
            raise ValueError("volume name is empty")
        return "/volumes/" + urllib.parse.quote(name, safe="") + suffix

    @classmethod
    def create(cls, name: str, size_gib: int, *, api_key: str | None = None, base_url: str | None = None) -> "Volume":
        """Make the volume ``name`` of ``size_gib`` GiB (conflict if the
        account has one of that name; forbidden past the storage quota)."""
        t = Transport(base_url, api_key)
        return cls._from_json(t.json("POST", "/volumes", json_body={"name": name, "size_gib": size_gib}), t)

    @classmethod
    def list(cls, *, api_key: str | None = None, base_url: str | None = None) -> List["Volume"]:
        """The account's volumes, by name."""
        t = Transport(base_url, api_key)
        d = t.json("GET", "/volumes") or {}
        return [cls._from_json(v, t) for v in d.get("volumes") or []]

    @classmethod
    def get(cls, name: str, *, api_key: str | None = None, base_url: str | None = None) -> "Volume":
        """The volume ``name`` (APIError not_found if there is none)."""
        t = Transport(base_url, api_key)
        return cls._from_json(t.json("GET", cls._path(name)), t)

    def _transport(self) -> Transport:
        if self._t is None:
            self._t = Transport(None, None)
        return self._t

    def delete(self) -> None:
        """Remove the volume and its files (conflict while a live or paused
        sandbox mounts it)."""
        self._transport().request("DELETE", self._path(self.name))

    def read_file(self, path: str) -> bytes:
        """The bytes of the regular file ``path``. Symbolic links a sandbox
        made are never followed (invalid_request)."""
        _, data = self._transport().request("GET", self._path(self.name, "/files"), query={"path": path})
        return data

    def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """Write ``data`` to ``path``, making its parents."""
        if isinstance(data, str):
            data = data.encode()
        self._transport().request("PUT", self._path(self.name, "/files"), query={"path": path}, body=bytes(data))

    def list_files(self, path: str = "/") -> List[VolumeEntry]:
        """The entries of directory ``path``."""
        d = self._transport().json("GET", self._path(self.name, "/files"), query={"path": path}) or {}
        return [VolumeEntry(e.get("name", ""), e.get("type", ""), int(e.get("size", 0))) for e in d.get("entries") or []]

    def remove_file(self, path: str) -> None:
        """Remove a file, a link or an empty directory."""
        self._transport().request("DELETE", self._path(self.name, "/files"), query={"path": path})
