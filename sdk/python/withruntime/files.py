"""Files inside a sandbox: ``sbx.files``.

Paths inside the sandbox may be relative: they land in /workspace.
"""

from __future__ import annotations

import http.client
import os
import socket
import stat as _stat
import tarfile
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, List, Mapping, Union

from . import _archive
from ._archive import CHUNK
from ._time import parse_time
from .errors import APIError, Error, TransportError

if TYPE_CHECKING:
    from ._transport import Transport

__all__ = ["Files", "FileInfo", "TransferResult"]

PathArg = Union[str, "os.PathLike[str]"]

# The server's bound on a single-file body; larger files go as an archive.
MAX_FILE_BODY = 512 << 20


@dataclass(frozen=True)
class FileInfo:
    """One file inside a sandbox. ``path`` is absolute; ``type`` is one of
    ``file``, ``dir``, ``symlink``, ``other``; ``target`` is a link's target;
    ``owner`` and ``group`` are names from the sandbox's /etc/passwd and
    /etc/group (the decimal id where none); ``attrs`` are the extended
    attributes in the user namespace, named without ``user.``."""

    name: str
    path: str
    type: str
    size: int
    mode: int
    mtime: datetime | None
    target: str | None = None
    owner: str | None = None
    group: str | None = None
    attrs: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FileInfo:
        return cls(
            name=str(d.get("name", "")),
            path=str(d.get("path", "")),
            type=str(d.get("type", "")),
            size=int(d.get("size") or 0),
            mode=int(d.get("mode") or 0),
            mtime=parse_time(d.get("mtime")),
            target=d.get("target") or None,
            owner=d.get("owner") or None,
            group=d.get("group") or None,
            attrs={str(k): str(v) for k, v in (d.get("attrs") or {}).items()},
        )


@dataclass(frozen=True)
class TransferResult:
    """What an upload or download moved: regular files and links, and bytes."""

    files: int
    bytes: int


class Files:
    """File operations on one sandbox (``sbx.files``).

    Every call acts as a user of the sandbox, and the sandbox's kernel
    checks its permissions as for a process of that user: ``user`` (the
    default, who owns /workspace and /home/user) or ``root`` with
    ``user="root"``. What the user may not do raises APIError with code
    ``forbidden``; what it makes is its own.
    """

    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._t = transport
        self._id = sandbox_id

    def _p(self, suffix: str) -> str:
        return f"/sandboxes/{self._id}/{suffix}"

    # -- single files ------------------------------------------------------

    def read(
        self, path: PathArg, encoding: str = "utf-8", errors: str = "strict", *, user: str | None = None
    ) -> str:
        """The content of a file as text."""
        return self.read_bytes(path, user=user).decode(encoding, errors)

    def read_bytes(self, path: PathArg, *, user: str | None = None) -> bytes:
        """The content of a file as bytes."""
        _, data = self._t.request("GET", self._p("files"), query=_query(path, user))
        return data

    def _read_head(self, path: PathArg, limit: int, *, user: str | None = None) -> tuple[bytes, int | None]:
        """At most `limit` bytes from the start of a file, and its size when
        the server said it; the rest is not transferred."""
        with self._t.stream("GET", self._p("files"), query=_query(path, user)) as resp:
            length = resp.getheader("Content-Length")
            try:
                data = resp.read(limit)
                more = resp.read(1) if len(data) == limit else b""
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"reading {path}: the stream broke: {e}") from e
            total = int(length) if length and length.isdigit() else (None if more else len(data))
            if not more:
                resp.read()
            return data, total

    def write(
        self,
        path: PathArg,
        data: str | bytes,
        mode: int = 0o644,
        *,
        user: str | None = None,
        attrs: Mapping[str, str] | None = None,
    ) -> FileInfo:
        """Write a whole file (str is encoded as UTF-8); parent directories are
        made. ``attrs`` are extended attributes in the user namespace (names
        without ``user.``; printable ASCII, at most 4096 bytes in all) set on
        the new file, which keeps no others."""
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        attr = [f"{k}={v}" for k, v in (attrs or {}).items()] or None
        d = self._t.json(
            "PUT",
            self._p("files"),
            query=_query(path, user, mode=f"{mode & 0o777:04o}", attr=attr),
            body=body,
            headers={"Content-Type": "application/octet-stream"},
        )
        return FileInfo.from_json(d or {})

    def list(self, path: PathArg = ".", *, user: str | None = None) -> List[FileInfo]:
        """The entries of a directory."""
        d = self._t.json("GET", self._p("files/list"), query=_query(path, user)) or {}
        return [FileInfo.from_json(e) for e in d.get("entries") or []]

    def stat(self, path: PathArg, *, user: str | None = None) -> FileInfo:
        """Information about one file; APIError with code not_found if missing."""
        return FileInfo.from_json(self._t.json("GET", self._p("files/stat"), query=_query(path, user)) or {})

    def exists(self, path: PathArg, *, user: str | None = None) -> bool:
        """Whether the path exists in the sandbox."""
        try:
            self.stat(path, user=user)
        except APIError as e:
            if e.code == "not_found":
                return False
            raise
        return True

    def mkdir(self, path: PathArg, *, user: str | None = None) -> FileInfo:
        """Make a directory and its parents (no error if it exists)."""
        return FileInfo.from_json(self._t.json("POST", self._p("files/mkdir"), query=_query(path, user)) or {})

    def remove(self, path: PathArg, recursive: bool = False, *, user: str | None = None) -> None:
        """Remove a file, or a directory (with recursive=True when not empty)."""
        q = _query(path, user)
        if recursive:
            q["recursive"] = True
        self._t.request("DELETE", self._p("files"), query=q)

    # -- trees -------------------------------------------------------------

    def upload(self, local: PathArg, remote: PathArg, *, user: str | None = None) -> TransferResult:
        """Copy a local file or directory to `remote`, which becomes that file
        or directory (parents are made). A directory goes as one tar stream,
        read from disk as it is sent."""
        local = os.fspath(local)
        remote_s = _remote(remote)
        st = os.stat(local)
        if _stat.S_ISDIR(st.st_mode):
            return self._put_archive(remote_s, _archive.tar_stream(local), user)
        if not _stat.S_ISREG(st.st_mode):
            raise Error(f"{local} is neither a regular file nor a directory")
        if st.st_size > MAX_FILE_BODY:
            parent, name = _split_remote(remote_s)
            self._put_archive(parent, _single_file_tar(local, name, st), user)
        else:
            self._t.request(
                "PUT",
                self._p("files"),
                query=_query(remote_s, user, mode=f"{st.st_mode & 0o777:04o}"),
                body=_file_chunks(local, st.st_size),
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(st.st_size)},
            )
        return TransferResult(1, st.st_size)

    def _put_archive(self, remote_dir: str, chunks: Any, user: str | None) -> TransferResult:
        # The server makes remote_dir (and its parents) if missing, and says
        # how many files (and links) and bytes it wrote.
        d = self._t.json(
            "PUT",
            self._p("archive"),
            query=_query(remote_dir, user),
            body=chunks,
            headers={"Content-Type": "application/x-tar"},
        ) or {}
        return TransferResult(int(d.get("files") or 0), int(d.get("bytes") or 0))

    def download(
        self,
        remote: PathArg,
        local: PathArg,
        *,
        merge: bool = False,
        max_bytes: int = _archive.DEFAULT_MAX_BYTES,
        max_entries: int = _archive.DEFAULT_MAX_ENTRIES,
        user: str | None = None,
    ) -> TransferResult:
        """Copy a file or directory of the sandbox to `local`, which becomes
        that file or directory; a file onto an existing directory lands inside
        it under its own name (the last element of `remote` as given).

        Everything comes as one tar stream, extracted as it arrives, and what
        the sandbox sends is untrusted. Whether `remote` is a file or a
        directory is decided from the archive itself, never from an earlier
        stat: one file only when the archive holds that file (or link) alone
        under `remote`'s own name. A directory is refused onto an existing
        file, and onto an existing directory unless merge=True (then its
        entries are extracted into it, files there replaced). Symbolic links
        come back as links, whatever they point to (a virtualenv's
        bin/python -> /usr/bin/python3, say), but nothing is written through
        a link: an entry whose parent path passes through one, a file or
        directory entry whose name is already a link, an absolute name, '..',
        a device file or a FIFO stops the extraction with withruntime.Error.
        More than `max_entries` entries (default 1,000,000) or `max_bytes`
        bytes of files (default 10 GiB) raise ArchiveTooLargeError. What was
        extracted before an error stays."""
        local = os.fspath(local)
        remote_s = _remote(remote)
        name = _archive.source_name(remote_s)
        with self._t.stream(
            "GET", self._p("archive"), query=_query(remote_s, user), headers={"Accept": "application/x-tar"}
        ) as resp:
            try:
                files, size = _archive.download(
                    resp, local, name, merge=merge, max_bytes=max_bytes, max_entries=max_entries
                )
                resp.read(_DRAIN)  # the end of the stream: a cut one says so
            except tarfile.TarError as e:
                raise TransportError(f"downloading {remote_s}: bad or cut archive: {e}") from e
            except (http.client.HTTPException, ConnectionError, socket.timeout, EOFError) as e:
                raise TransportError(f"downloading {remote_s}: the archive stream broke: {e}") from e
        return TransferResult(files, size)


# What is read past an archive's end before the stream is closed.
_DRAIN = 64 << 10


def _remote(path: PathArg) -> str:
    p = os.fspath(path)
    if not p:
        raise ValueError("path is empty")
    return p


def _query(path: PathArg, user: str | None, **extra: Any) -> dict[str, Any]:
    # No user: the server's default, the sandbox user.
    q: dict[str, Any] = {"path": _remote(path), **extra}
    if user is not None:
        q["user"] = user
    return q


def _split_remote(path: str) -> tuple[str, str]:
    path = path.rstrip("/")
    if "/" not in path:
        return ".", path
    parent, name = path.rsplit("/", 1)
    return parent or "/", name


def _file_chunks(path: str, size: int) -> Any:
    with open(path, "rb") as f:
        left = size
        while left:
            data = f.read(min(CHUNK, left))
            if not data:
                raise Error(f"{path} shrank while it was being uploaded")
            left -= len(data)
            yield data


def _single_file_tar(path: str, name: str, st: os.stat_result) -> Any:
    # A tar holding one file, for files above the single-body bound.
    info = tarfile.TarInfo(name)
    info.size = st.st_size
    info.mode = st.st_mode & 0o777
    info.mtime = int(st.st_mtime)
    yield info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    yield from _file_chunks(path, st.st_size)
    yield b"\0" * (-st.st_size % tarfile.BLOCKSIZE) + b"\0" * (2 * tarfile.BLOCKSIZE)
