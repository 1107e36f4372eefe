"""Templates: the named, immutable file systems sandboxes start from.

    from withruntime import Sandbox, Template

    with Sandbox.create() as sbx:
        sbx.exec("python3 -m pip install --user pandas==2.2.3", check=True)
        tpl = sbx.snapshot("myteam/pandas:2.2")       # the sandbox keeps running
    print([f"{t.name}:{t.tag}" for t in Template.list()])
    with Sandbox.create(template="myteam/pandas:2.2") as sbx:
        sbx.exec("python3 -c 'import pandas'", check=True)

Or build one on the server from steps, layered on a template or an image:

    tpl = (Template().from_template("default")
           .pip_install(["pandas==2.2.3"])
           .copy("app/", "/workspace/app")
           .start_cmd("python3 -m http.server 8000")
           .build("myteam/app", on_log=print, network={"internet": True}))

A template is named ``name`` (tag ``latest``) or ``name:tag``; a name has
one or two parts joined by ``/``. ``Template.list/get/delete`` and
``Template.import_archive`` (a ``docker save`` tarball or an OCI archive)
follow the Go client (ListTemplates, GetTemplate, DeleteTemplate,
ImportTemplate); they return :class:`TemplateInfo`, the API's template.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import tarfile
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Union

from ._time import parse_time
from ._transport import Transport
from .errors import APIError, TransportError, api_error_from_detail

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
    """A template build, and the templates of the key's account.

    An instance is a builder: each method adds a step (or sets the base or
    a default) and returns the builder, and :meth:`build` sends the whole
    as one build specification (POST /v1/templates) and waits for it::

        Template().from_template("default").run("make").build("myteam/app")

    The static methods (``Template.list/get/delete/import_archive``) work on
    the templates themselves. Every call takes ``api_key`` and ``base_url``
    (default WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL) and returns
    :class:`TemplateInfo`. A sandbox starts from one with
    ``Sandbox.create(template="name[:tag]")``; ``sbx.snapshot(name)`` makes
    one from a running sandbox.
    """

    def __init__(self) -> None:
        self._from: Dict[str, str] | None = None
        self._dockerfile: str | None = None
        self._steps: List[Dict[str, Any]] = []
        self._defaults: Dict[str, Any] = {}

    # -- the builder ---------------------------------------------------------

    def from_template(self, name: str) -> Template:
        """Build on template ``name`` (``default``, the built-in image, or
        ``name[:tag]``). Without a base the build starts from ``default``."""
        check_template_name(name)
        self._from = {"template": name}
        return self

    def from_image(self, ref: str) -> Template:
        """Build on the OCI image ``ref`` (``python:3.12-slim``,
        ``registry:5000/team/app@sha256:...``). The server pulls it when
        the build runs (the log shows its layers), anonymously, from a
        registry at a public address unless the server allows private
        ones; a rebuild from the same image digest is cached. A Dockerfile
        names an image archive in the context with ``FROM archive://PATH``."""
        if not isinstance(ref, str) or not ref:
            raise _bad_build("from_image: the image reference is empty")
        self._from = {"image": ref}
        return self

    def from_dockerfile(self, path_or_text: Union[str, "os.PathLike[str]"]) -> Template:
        """Build from a Dockerfile: the path of one, or its text (anything
        holding a newline, or naming no file, is taken as text). A
        Dockerfile is the whole build: it excludes the base and the steps
        of the other methods (start_cmd and ready_cmd still apply). Its
        COPY sources come from the ``context`` directory given to build(),
        which is then sent whole."""
        text: str
        if isinstance(path_or_text, os.PathLike) or ("\n" not in path_or_text and os.path.isfile(path_or_text)):
            with open(path_or_text, encoding="utf-8") as f:
                text = f.read()
        else:
            text = path_or_text
        self._dockerfile = text
        return self

    def apt_install(self, packages: Union[str, Sequence[str]]) -> Template:
        """Install Debian packages (as root)."""
        self._steps.append({"apt_install": _names(packages, "apt_install")})
        return self

    def pip_install(self, packages: Union[str, Sequence[str]]) -> Template:
        """Install Python packages with pip (``pandas==2.2.3``)."""
        self._steps.append({"pip_install": _names(packages, "pip_install")})
        return self

    def npm_install(self, packages: Union[str, Sequence[str]], *, global_install: bool = False) -> Template:
        """Install npm packages into the working directory, or with
        ``global_install`` globally (``npm install -g``, as root)."""
        step: Dict[str, Any] = {"npm_install": _names(packages, "npm_install")}
        if global_install:
            step["global"] = True
        self._steps.append(step)
        return self

    def run(self, cmd: str, *, user: str | None = None) -> Template:
        """Run the shell command ``cmd``, as ``user`` (default: the build's
        current user); the build fails when it exits non-zero."""
        step: Dict[str, Any] = {"run": cmd}
        if user:
            step["user"] = user
        self._steps.append(step)
        return self

    def copy(self, local: Union[str, "os.PathLike[str]"], dest: str, *, user: str | None = None,
             mode: str | None = None) -> Template:
        """Copy ``local``, a file or directory relative to the build's
        context directory (``context=`` of build(), default the current
        directory), to ``dest`` in the template: a directory's contents go
        into ``dest``; a file goes to ``dest``, or into it when ``dest``
        ends in "/". ``user`` owns what is copied; ``mode`` ("0755")
        replaces its permissions. Only what copy steps name is sent, read
        when build() runs; a path with ``..``, an absolute one, or one
        whose symbolic links lead out of the context is refused."""
        src = _context_rel(local)
        c: Dict[str, Any] = {"src": src, "dest": dest}
        if user:
            c["user"] = user
        if mode:
            c["mode"] = mode
        self._steps.append({"copy": c})
        return self

    def env(self, mapping: Mapping[str, str]) -> Template:
        """Set environment variables for the later steps and the
        template's sandboxes."""
        self._steps.append({"env": {str(k): str(v) for k, v in mapping.items()}})
        return self

    def workdir(self, path: str) -> Template:
        """Set the working directory of the later steps and of the
        template's sandboxes (made when missing)."""
        self._steps.append({"workdir": path})
        return self

    def user(self, name: str) -> Template:
        """Run the later steps as ``name``, and make it the template's
        default user."""
        self._steps.append({"user": name})
        return self

    def start_cmd(self, cmd: str) -> Template:
        """A shell command every sandbox of the template starts in the
        background."""
        self._defaults["start_cmd"] = cmd
        return self

    def ready_cmd(self, cmd: str, timeout_seconds: int | None = None) -> Template:
        """A shell command a create of the template waits on until it
        exits 0 (at most ``timeout_seconds``)."""
        self._defaults["ready_cmd"] = cmd
        if timeout_seconds:
            self._defaults["ready_timeout_seconds"] = int(timeout_seconds)
        else:
            self._defaults.pop("ready_timeout_seconds", None)
        return self

    def to_spec(self, name: str, *, network: Mapping[str, Any] | None = None, no_cache: bool = False) -> Dict[str, Any]:
        """The build specification build() sends for template ``name``
        (the JSON body of POST /v1/templates)."""
        check_template_name(name)
        spec: Dict[str, Any] = {"name": name}
        if self._dockerfile is not None:
            if self._from is not None or self._steps:
                raise _bad_build("a Dockerfile is the whole build: give it, or a base and steps, not both")
            spec["dockerfile"] = self._dockerfile
        else:
            if self._from is not None:
                spec["from"] = dict(self._from)
            if self._steps:
                spec["steps"] = [json.loads(json.dumps(s)) for s in self._steps]
        spec.update(self._defaults)
        if network is not None:
            spec["network"] = dict(network)
        if no_cache:
            spec["no_cache"] = True
        return spec

    def build(
        self,
        name: str,
        *,
        on_log: Optional[Callable[[str], Any]] = None,
        network: Mapping[str, Any] | None = None,
        no_cache: bool = False,
        context: Union[str, "os.PathLike[str]", None] = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> TemplateInfo:
        """Build template ``name`` (``name`` or ``name:tag``) on the server
        and return it once made.

        ``on_log`` is called with each event of the build's log as a line
        of text: ``step 2/5: run make`` as a step begins (``(cached)``
        when taken from the cache), the steps' output as it comes, what the
        builder does. ``network`` is the steps' egress,
        ``{"internet": True, "allow": [hosts]}`` (none without it);
        ``no_cache`` runs every step. ``context`` is the directory copy
        steps read from (default: the current directory).

        A build that fails raises APIError: ``invalid_request`` for a step
        that failed (the message names the step and its exit code), or the
        platform's refusal.
        """
        spec = self.to_spec(name, network=network, no_cache=no_cache)
        t = Transport(base_url, api_key)
        srcs = [s["copy"]["src"] for s in self._steps if "copy" in s]
        send_context = bool(srcs) or (self._dockerfile is not None and context is not None)
        if send_context:
            root = os.path.realpath(os.fspath(context) if context is not None else os.getcwd())
            if not os.path.isdir(root):
                raise _bad_build(f"the build context {root} is not a directory")
            with tempfile.TemporaryFile() as f:
                _write_build_tar(f, json.dumps(spec).encode(), root, srcs if srcs and self._dockerfile is None else None)
                size = f.tell()
                f.seek(0)
                d = t.json("POST", "/templates", body=_chunks(f), timeout=None,
                           headers={"Content-Type": "application/x-tar", "Content-Length": str(size)})
        else:
            d = t.json("POST", "/templates", json_body=spec, timeout=None)
        b = d or {}
        bid = str(b.get("id") or "")
        if not bid:
            raise TransportError(f"POST {t.base_url}/templates: the answer names no build: {str(b)[:200]}")
        _follow_logs(t, bid, on_log)
        path = "/templates/builds/" + urllib.parse.quote(bid, safe="")
        while True:
            b = t.json("GET", path) or {}
            if b.get("state") in ("succeeded", "failed"):
                break
            # The log ended a moment before the state was stored, or its
            # stream broke: look again shortly.
            time.sleep(0.5)
        if b.get("state") != "succeeded" or not b.get("result"):
            err = b.get("error") if isinstance(b.get("error"), dict) else {}
            e = api_error_from_detail(err or {"code": "internal", "message": "the build ended without a template"})
            where = f"build {bid} of {b.get('template') or name} failed at step {b.get('step', 0)} of {b.get('steps', 0)}"
            raise APIError(e.code, e.status, f"{where}: {e.message}")
        return TemplateInfo.from_json(b["result"])

    # -- the templates -------------------------------------------------------

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


# A line of a build's log stream is at most this long (the Go client's bound).
_MAX_LOG_LINE = 1 << 20


def _bad_build(why: str) -> APIError:
    return APIError("invalid_request", 400, f"bad template build: {why}")


def _names(packages: Union[str, Sequence[str]], step: str) -> List[str]:
    names = [packages] if isinstance(packages, str) else [str(p) for p in packages]
    if not names:
        raise _bad_build(f"{step}: no packages")
    return names


def _context_rel(local: Union[str, "os.PathLike[str]"]) -> str:
    """``local`` as the spec's copy src: a clean relative path with "/"
    separators, refused when absolute or holding ``..``."""
    p = os.fspath(local)
    if not isinstance(p, str) or not p:
        raise _bad_build(f"copy: empty source {local!r}")
    posix = p.replace(os.sep, "/")
    trail = posix.endswith("/")
    parts = [x for x in posix.split("/") if x not in ("", ".")]
    if posix.startswith("/") or os.path.isabs(p):
        raise _bad_build(f"copy: {p!r} is absolute; give a path relative to the build context")
    if ".." in parts:
        raise _bad_build(f"copy: {p!r} leaves the build context ('..')")
    if not parts:
        raise _bad_build(f"copy: {p!r} is the context itself; name a file or directory in it")
    return "/".join(parts) + ("/" if trail else "")


def _inside(root: str, p: str) -> bool:
    return p == root or p.startswith(root.rstrip(os.sep) + os.sep)


def _write_build_tar(f: IO[bytes], spec: bytes, root: str, srcs: Optional[List[str]]) -> None:
    """The API's application/x-tar form into f: the spec's entry, then the
    build context: the sources of the copy steps (``srcs``), or with None
    the whole ``root``. Symbolic links are sent as links, never followed;
    a source reached through a link that leads out of root is refused, and
    so is anything but files, directories and links."""
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("withruntime-build.json")
        ti.size, ti.mode, ti.mtime = len(spec), 0o644, int(time.time())
        tf.addfile(ti, _BytesReader(spec))
        added: set[str] = set()

        def add(rel: str) -> None:
            if rel in added:
                return
            full = os.path.join(root, *rel.split("/"))
            st = os.lstat(full)
            ti = tarfile.TarInfo(rel + ("/" if stat.S_ISDIR(st.st_mode) else ""))
            ti.mode, ti.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
            if stat.S_ISLNK(st.st_mode):
                ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink(full)
                tf.addfile(ti)
            elif stat.S_ISDIR(st.st_mode):
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif stat.S_ISREG(st.st_mode):
                ti.size = st.st_size
                with open(full, "rb") as src:
                    tf.addfile(ti, src)
            else:
                raise _bad_build(f"the build context holds {full}, which is neither a file, a directory nor a symbolic link")
            added.add(rel)
            if stat.S_ISDIR(st.st_mode):
                for child in sorted(os.listdir(full)):
                    add(rel + "/" + child)

        if srcs is None:
            for child in sorted(os.listdir(root)):
                add(child)
            return
        for src in srcs:
            rel = src.rstrip("/")
            full = os.path.join(root, *rel.split("/"))
            # The parent directories must be the context's own: a link on
            # the way would take the copy out of it.
            if not _inside(root, os.path.realpath(os.path.dirname(full))):
                raise _bad_build(f"copy: {src!r} leads out of the build context {root} through a symbolic link")
            if not os.path.lexists(full):
                raise _bad_build(f"copy: {src!r} is not in the build context {root}")
            if os.path.islink(full) and not _inside(root, os.path.realpath(full)):
                raise _bad_build(f"copy: {src!r} is a symbolic link out of the build context {root}")
            parts = rel.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in added:
                    ti = tarfile.TarInfo(parent + "/")
                    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                    tf.addfile(ti)
                    added.add(parent)
            add(rel)


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._at + n
        b = self._data[self._at:end]
        self._at += len(b)
        return b


def log_line(ev: Mapping[str, Any]) -> str | None:
    """One event of a build's log as a line of text (the CLI's form), or
    None for one that says nothing."""
    kind = ev.get("type")
    msg = str(ev.get("message") or "")
    if kind == "step":
        cached = " (cached)" if ev.get("cached") else ""
        return f"step {ev.get('step', 0)}/{ev.get('steps', 0)}: {msg}{cached}"
    if kind in ("stdout", "stderr"):
        return msg[:-1] if msg.endswith("\n") else msg
    if kind == "info":
        return msg
    if kind == "dropped":
        return f"({ev.get('dropped', 0)} older log events dropped)"
    if kind == "end":
        if msg:
            return msg
        err = ev.get("error") if isinstance(ev.get("error"), dict) else {}
        return f"build {ev.get('state', '')}" + (f": {err.get('message')}" if err and err.get("message") else "")
    return msg or None


def _follow_logs(t: Transport, bid: str, on_log: Optional[Callable[[str], Any]]) -> bool:
    """Read build bid's log until its end event, calling on_log with each
    event's line; False when the stream broke or ended before it (the
    caller then waits on the build's state)."""
    path = "/templates/builds/" + urllib.parse.quote(bid, safe="") + "/logs"
    with t.stream("GET", path, headers={"Accept": "application/x-ndjson"}, body_timeout=None) as resp:
        while True:
            try:
                line = resp.readline(_MAX_LOG_LINE + 1)
            except (OSError, http.client.HTTPException):
                # What on_log raises is not caught here: only the stream's
                # own failures end the reading quietly. A response left
                # unread is not closed here: Transport.stream then closes
                # its connection rather than reusing it.
                return False
            if not line or len(line) > _MAX_LOG_LINE:
                return False
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            if on_log is not None:
                text = log_line(ev)
                if text is not None:
                    on_log(text)
            if ev.get("type") == "end":
                try:
                    resp.read(64 * 1024)
                except (OSError, http.client.HTTPException):
                    pass
                return True
