"""Templates: the named, immutable file systems sandboxes start from.

    from withruntime import Sandbox, Template

    with Sandbox.create() as sbx:
        sbx.exec("python3 -m pip install --user pandas==2.2.3", check=True)
        tpl = sbx.snapshot("myteam/pandas:2.2")       # the sandbox keeps running
    print([f"{t.name}:{t.tag}" for t in Template.list()])
    with Sandbox.create(template="myteam/pandas:2.2") as sbx:
        sbx.exec("python3 -c 'import pandas'", check=True)

A template is named ``name`` (tag ``latest``) or ``name:tag``; a name has
one or two parts joined by ``/``. ``Template.list/get/delete`` and
``Template.import_archive`` (a ``docker save`` tarball or an OCI archive)
follow the Go client (ListTemplates, GetTemplate, DeleteTemplate,
ImportTemplate); they return :class:`TemplateInfo`, the API's template.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, List, Union

from ._time import parse_time
from ._transport import Transport
from .errors import APIError

__all__ = ["Template", "TemplateInfo", "TemplateDefaults"]

_CHUNK = 1 << 20

ArchiveArg = Union[str, "os.PathLike[str]", IO[bytes]]


@dataclass(frozen=True)
class TemplateDefaults:
    """What a sandbox of a template starts with unless its create says
    otherwise: ``env``, ``workdir``, ``user``, a size (``vcpus``,
    ``memory_mib``), ``start_cmd`` (a shell command every sandbox of it
    starts in the background) and ``ready_cmd`` (one a create waits on
    until it exits 0, at most ``ready_timeout_seconds``)."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    user: str = ""
    vcpus: int = 0
    memory_mib: int = 0
    start_cmd: str = ""
    ready_cmd: str = ""
    ready_timeout_seconds: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TemplateDefaults:
        return cls(
            env={str(k): str(v) for k, v in (d.get("env") or {}).items()},
            workdir=str(d.get("workdir") or ""),
            user=str(d.get("user") or ""),
            vcpus=int(d.get("vcpus") or 0),
            memory_mib=int(d.get("memory_mib") or 0),
            start_cmd=str(d.get("start_cmd") or ""),
            ready_cmd=str(d.get("ready_cmd") or ""),
            ready_timeout_seconds=int(d.get("ready_timeout_seconds") or 0),
        )


@dataclass(frozen=True)
class TemplateInfo:
    """A template as the API shows it (the fields of the API's Template).

    ``id`` is ``tpl_`` and 16 hex digits (a name:tag made again gets a new
    one). ``source`` says how it was made: ``snapshot``, ``oci`` or
    ``build``; ``base`` is the built-in image it is layered on
    (``default``), or empty for an OCI image's own file system. ``layers``
    counts its layers over the base and ``size_bytes`` what they hold.
    ``state`` is ``ready``, or ``deleting`` once removed while sandboxes
    still use it. ``public``: the admin published it to every account.
    ``raw`` keeps the whole JSON object, fields newer than this SDK
    included.
    """

    id: str
    name: str
    tag: str
    source: str = ""
    base: str = ""
    layers: int = 0
    size_bytes: int = 0
    defaults: TemplateDefaults = field(default_factory=TemplateDefaults)
    created_at: datetime | None = None
    state: str = ""
    public: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ref(self) -> str:
        """``name:tag``, as a create's ``template`` takes it."""
        return f"{self.name}:{self.tag}"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TemplateInfo:
        return cls(
            id=str(d.get("id") or ""),
            name=str(d.get("name") or ""),
            tag=str(d.get("tag") or ""),
            source=str(d.get("source") or ""),
            base=str(d.get("base") or ""),
            layers=int(d.get("layers") or 0),
            size_bytes=int(d.get("size_bytes") or 0),
            defaults=TemplateDefaults.from_json(d.get("defaults") or {}),
            created_at=parse_time(d.get("created_at")),
            state=str(d.get("state") or ""),
            public=bool(d.get("public") or False),
            raw=dict(d),
        )


def template_path(name: str) -> str:
    """The route of template ``name``: the route's ``{name}`` is one path
    segment, so the whole name is escaped, its "/" as %2F. A name with a
    part between "/" that is empty, "." or ".." is refused before anything
    is sent, as the server would refuse it: some proxies unescape %2F and
    clean the path, which would send the call to another route."""
    check_template_name(name)
    if any(p in ("", ".", "..") for p in name.split("/")):
        raise _bad_name(name, 'a part between "/" is empty, "." or ".."')
    return "/templates/" + urllib.parse.quote(name, safe=":")


def check_template_name(name: Any) -> None:
    """Refuse an empty name (or one that is no string) before it is sent,
    as the server would: APIError invalid_request."""
    if not isinstance(name, str) or not name:
        raise _bad_name(name, "empty")


def _bad_name(name: Any, why: str) -> APIError:
    return APIError("invalid_request", 400, f"bad template name {name!r}: {why}")


def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        b = f.read(_CHUNK)
        if not b:
            return
        yield b


class Template:
    """Templates of the key's account, and the public ones.

    Every call takes ``api_key`` and ``base_url`` (default
    WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL) and returns
    :class:`TemplateInfo`. A sandbox starts from one with
    ``Sandbox.create(template="name[:tag]")``; ``sbx.snapshot(name)`` makes
    one from a running sandbox.
    """

    @staticmethod
    def list(*, api_key: str | None = None, base_url: str | None = None) -> List[TemplateInfo]:
        """The account's templates and the public ones, by name and tag."""
        d = Transport(base_url, api_key).json("GET", "/templates") or {}
        return [TemplateInfo.from_json(t) for t in d.get("templates") or []]

    @staticmethod
    def get(name: str, *, api_key: str | None = None, base_url: str | None = None) -> TemplateInfo:
        """Template ``name`` (``name`` or ``name:tag``); APIError not_found
        when there is none."""
        return TemplateInfo.from_json(Transport(base_url, api_key).json("GET", template_path(name)) or {})

    @staticmethod
    def delete(name: str, *, api_key: str | None = None, base_url: str | None = None) -> TemplateInfo:
        """Remove template ``name`` and return it as removed. Its name is
        free at once; while sandboxes, pools or paused sandboxes still use
        it its state is ``deleting``, and its storage goes with the last."""
        return TemplateInfo.from_json(Transport(base_url, api_key).json("DELETE", template_path(name)) or {})

    @staticmethod
    def import_archive(
        name: str,
        archive: ArchiveArg,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> TemplateInfo:
        """Make template ``name`` (``name`` or ``name:tag``) from an image
        archive: the path of a ``docker save`` tarball or an OCI archive
        (``skopeo copy ... oci-archive:FILE``), or a binary file object
        open on one. It is sent as it is read. The image's env, working
        directory, user and command become the template's defaults. The
        call waits as long as the server takes to store the image."""
        check_template_name(name)
        t = Transport(base_url, api_key)
        headers = {"Content-Type": "application/x-tar"}
        kw: dict[str, Any] = {"query": {"name": name}, "headers": headers, "timeout": None}
        if isinstance(archive, (str, os.PathLike)):
            with open(archive, "rb") as f:
                headers["Content-Length"] = str(os.fstat(f.fileno()).st_size)
                d = t.json("POST", "/templates/import", body=_chunks(f), **kw)
        else:
            d = t.json("POST", "/templates/import", body=_chunks(archive), **kw)
        return TemplateInfo.from_json(d or {})
