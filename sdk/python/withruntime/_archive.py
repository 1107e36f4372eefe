"""Directories as one streamed tar: written chunk by chunk for uploads,
extracted safely for downloads.

Writing does not go through tarfile.open (which wants a file to write to):
each entry's header comes from TarInfo.tobuf, its data is read from disk in
chunks, so a tree of any size is sent with bounded memory.

Extraction follows the Go client's rule (client.DownloadDir): symbolic links
are made as they are, whatever they point to, but nothing is ever written
through one, and no entry's parent path may pass through one (checked one
component at a time with lstat, so a link the archive made earlier, or one
already in the destination, stops the entry). Absolute names, ``..``
components, device files and FIFOs are refused with withruntime.Error.

A download's archive comes from the sandbox, so its length is untrusted too:
it is read through a bound on its own bytes, and its entries and the bytes of
its files are counted before anything of an entry is written
(ArchiveTooLargeError past max_entries or max_bytes). Whether it holds one
file or a directory is decided from the archive itself (download), never from
an earlier stat.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tarfile
from collections.abc import Iterator
from typing import IO

from .errors import Error

CHUNK = 1 << 20  # bytes of file data read at a time
_FLUSH = 256 << 10  # small entries are batched into chunks of about this size
_BLOCK = tarfile.BLOCKSIZE
# A new file only, never through a link that appeared meanwhile.
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_WINDOWS = os.name == "nt"


# A download's bounds, unless the caller raises them: the bytes of its
# regular files, and its entries (files, directories, links).
DEFAULT_MAX_BYTES = 10 << 30
DEFAULT_MAX_ENTRIES = 1_000_000
# The archive bytes each entry may take beyond its file's data (headers, PAX
# records, padding): the archive as a whole is read up to max_bytes plus this
# much per entry allowed, so a stream of headers alone ends too.
_HEADER_ALLOWANCE = 4 << 10
# Directories whose times are set once their entries are in: past this many,
# a directory keeps the time its extraction gave it (memory stays bounded).
_MAX_DIR_TIMES = 1 << 16


class UnsafeArchiveError(Error):
    """An archive entry is refused: it would be written outside its
    destination, through a symbolic link, or is a special file."""


class ArchiveTooLargeError(Error):
    """A download's archive is past a bound: more than max_entries entries,
    more than max_bytes bytes of files, or more archive bytes than those
    allow. What was extracted before stays."""


class DestinationError(Error):
    """A download's archive does not fit its destination: a directory onto a
    file, a file onto a directory of its name, or a directory onto an
    existing directory without merge=True."""


def tar_stream(root: str) -> Iterator[bytes]:
    """Yield a tar of the contents of directory `root`, names relative to it.

    Regular files, directories and symbolic links (kept as links) are
    included; sockets, FIFOs and device files are skipped.
    """
    buf = bytearray()
    for rel, full, st in _walk(root):
        info = tarfile.TarInfo(rel)
        info.mtime = int(st.st_mtime)
        info.mode = st.st_mode & 0o777
        if stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
        elif stat.S_ISLNK(st.st_mode):
            info.type = tarfile.SYMTYPE
            info.linkname = os.readlink(full)
        else:
            info.type = tarfile.REGTYPE
            info.size = st.st_size
        buf += info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        if info.type == tarfile.REGTYPE and info.size:
            with open(full, "rb") as f:
                left = info.size
                while left:
                    data = f.read(min(CHUNK, left))
                    if not data:
                        raise Error(f"{full} shrank while it was being uploaded")
                    left -= len(data)
                    buf += data
                    if len(buf) >= _FLUSH:
                        yield bytes(buf)
                        buf.clear()
            pad = -info.size % _BLOCK
            buf += b"\0" * pad
        if len(buf) >= _FLUSH:
            yield bytes(buf)
            buf.clear()
    buf += b"\0" * (2 * _BLOCK)
    yield bytes(buf)


def _walk(root: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """(relative name, full path, lstat) of every entry under root, parents
    before children, in name order; skips what a tar should not carry."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        full_dir = os.path.join(root, rel_dir) if rel_dir else root
        with os.scandir(full_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(rel)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue
            yield rel, e.path, st
        stack.extend(reversed(subdirs))


def _parts(name: str, what: str) -> list[str]:
    """The components of an archive name, refusing absolute names, '..' and
    NUL bytes. On POSIX a backslash or a colon is an ordinary character."""
    if name.startswith("/") or (_WINDOWS and (name.startswith("\\") or name[1:2] == ":")):
        raise UnsafeArchiveError(f"refusing {what} {name!r}: absolute name")
    if "\0" in name:
        raise UnsafeArchiveError(f"refusing {what} {name!r}: it contains a NUL byte")
    parts = [p for p in (name.replace("\\", "/") if _WINDOWS else name).split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"refusing {what} {name!r}: it contains '..'")
    return parts


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _parent(root: str, parts: list[str], name: str, create: bool) -> str:
    """The directory holding the entry named by `parts`, checked one component
    at a time from root: each must be a real directory, never a symbolic link
    (wherever it points); with `create`, missing ones are made."""
    path = root
    for part in parts[:-1]:
        path = os.path.join(path, part)
        st = _lstat(path)
        if st is None:
            if not create:
                raise UnsafeArchiveError(f"refusing {name!r}: {path} does not exist")
            os.mkdir(path)
        elif stat.S_ISLNK(st.st_mode):
            raise UnsafeArchiveError(f"refusing {name!r}: it passes through the symbolic link {path}")
        elif not stat.S_ISDIR(st.st_mode):
            raise UnsafeArchiveError(f"refusing {name!r}: it passes through {path}, which is not a directory")
    return path


def _write_new(target: str, src: IO[bytes] | None, mode: int, mtime: float) -> None:
    """Create target (which must not exist: never through a link) with the
    content of src, then set its mode and time on the open descriptor."""
    fd = os.open(target, _CREATE_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as out:
        if src is not None:
            shutil.copyfileobj(src, out, CHUNK)
        out.flush()
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode & 0o777)
        else:  # pragma: no cover - Windows
            os.chmod(target, mode & 0o777)
        if os.utime in os.supports_fd:
            os.utime(fd, (mtime, mtime))
        else:  # pragma: no cover - Windows
            os.utime(target, (mtime, mtime))


class _Bounded:
    """A file object passing at most `limit` bytes of `f`, then raising
    ArchiveTooLargeError; a stream that ends at the bound exactly is whole."""

    def __init__(self, f: IO[bytes], limit: int) -> None:
        self._f = f
        self._left = self._limit = limit

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            if self._f.read(1):
                raise ArchiveTooLargeError(f"the archive is over {self._limit} bytes")
            return b""
        if n is None or n < 0 or n > self._left:
            n = self._left
        data = self._f.read(n)
        self._left -= len(data)
        return data


class Reader:
    """The members of a download's archive, one at a time, each counted
    against the bounds before anything of it is written. Memory stays flat
    whatever the count: tarfile's list of members is emptied as it grows."""

    def __init__(
        self, fileobj: IO[bytes], max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        if max_bytes <= 0 or max_entries <= 0:
            raise ValueError("max_bytes and max_entries must be positive")
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.entries = self.bytes = 0
        limit = max_bytes + (max_entries + 1) * _HEADER_ALLOWANCE
        self._tf = tarfile.open(fileobj=_Bounded(fileobj, limit), mode="r|")  # type: ignore[call-overload]

    def next(self) -> tarfile.TarInfo | None:
        try:
            m = self._tf.next()
        except RecursionError as e:  # an endless chain of extended headers
            raise tarfile.HeaderError("too many extended headers in a row") from e
        self._tf.members.clear()
        if m is None:
            return None
        self.entries += 1
        if self.entries > self.max_entries:
            raise ArchiveTooLargeError(f"the archive has more than {self.max_entries} entries (at {m.name!r})")
        if m.isreg():
            if m.size > self.max_bytes - self.bytes:
                raise ArchiveTooLargeError(
                    f"the archive has more than {self.max_bytes} bytes of files (at {m.name!r}, {m.size} bytes)"
                )
            self.bytes += m.size
        return m

    def data(self, m: tarfile.TarInfo) -> IO[bytes] | None:
        return self._tf.extractfile(m)


class _Extractor:
    """Extracts members into the directory root (a real path), with the rule
    in extract's docstring."""

    def __init__(self, reader: Reader, root: str, dest: str) -> None:
        self.r, self.root, self.dest = reader, root, dest
        self.files = self.size = 0
        self._dir_times: dict[str, int] = {}

    def run(self, m: tarfile.TarInfo | None = None) -> tuple[int, int]:
        if m is None:
            m = self.r.next()
        while m is not None:
            self.entry(m)
            m = self.r.next()
        self.finish()
        return self.files, self.size

    def entry(self, m: tarfile.TarInfo) -> None:
        parts = _parts(m.name, "entry")
        if not parts:
            if m.isdir():
                return
            raise UnsafeArchiveError(f"refusing entry {m.name!r}: it names the destination itself")
        if not (m.isdir() or m.isreg() or m.issym() or m.islnk()):
            raise UnsafeArchiveError(
                f"refusing entry {m.name!r}: device files, FIFOs and other special files are not extracted"
            )
        root = self.root
        target = os.path.join(_parent(root, parts, m.name, create=True), parts[-1])
        st = _lstat(target)
        is_link = st is not None and stat.S_ISLNK(st.st_mode)
        is_dir = st is not None and stat.S_ISDIR(st.st_mode)

        if m.isdir():
            if is_link:
                raise UnsafeArchiveError(f"refusing entry {m.name!r}: {target} is a symbolic link")
            if not is_dir:
                if st is not None:
                    os.unlink(target)  # a file gives way to the directory
                os.mkdir(target, 0o700)
            # The owner always keeps rwx, so the mode can be set at once; the
            # time waits for the directory's entries.
            os.chmod(target, (m.mode & 0o777) | 0o700)
            if target in self._dir_times or len(self._dir_times) < _MAX_DIR_TIMES:
                self._dir_times[target] = int(m.mtime)
            return

        if is_dir:
            raise UnsafeArchiveError(f"refusing entry {m.name!r}: a directory of that name exists")

        if m.issym():
            if st is not None:
                os.unlink(target)  # replaced, never followed
            os.symlink(m.linkname, target)
            self.files += 1
        elif m.islnk():
            src_parts = _parts(m.linkname, "hard link target")
            if not src_parts:
                raise UnsafeArchiveError(f"refusing hard link {m.name!r}: it names the destination itself")
            src = os.path.join(_parent(root, src_parts, m.linkname, create=False), src_parts[-1])
            src_st = _lstat(src)
            if src_st is None or not (stat.S_ISREG(src_st.st_mode) or stat.S_ISLNK(src_st.st_mode)):
                raise UnsafeArchiveError(
                    f"refusing hard link {m.name!r} -> {m.linkname!r}: no such file inside {self.dest}"
                )
            if src == target:
                return  # a link to itself: the file is there already
            if st is not None:
                os.unlink(target)
            if stat.S_ISLNK(src_st.st_mode):
                os.symlink(os.readlink(src), target)
            else:
                with os.fdopen(os.open(src, _READ_FLAGS), "rb") as src_f:
                    _write_new(target, src_f, src_st.st_mode, src_st.st_mtime)
                self.size += src_st.st_size
            self.files += 1
        else:
            if is_link:
                raise UnsafeArchiveError(f"refusing entry {m.name!r}: {target} is a symbolic link")
            if st is not None:
                os.unlink(target)
            _write_new(target, self.r.data(m), m.mode, m.mtime)
            self.files += 1
            self.size += m.size

    def place(self, staged: str, name: str, is_link: bool, size: int) -> None:
        """Move a staged entry (a file or link held under a temporary name)
        to `name` in root, with the rules of entry."""
        target = os.path.join(self.root, name)
        st = _lstat(target)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise UnsafeArchiveError(f"refusing entry {name!r}: a directory of that name exists")
        if st is not None and stat.S_ISLNK(st.st_mode) and not is_link:
            raise UnsafeArchiveError(f"refusing entry {name!r}: {target} is a symbolic link")
        os.replace(staged, target)
        self.files += 1
        self.size += size

    def finish(self) -> None:
        # Directory times last, once their entries are in. Never follow a
        # link here either.
        for path, mtime in reversed(self._dir_times.items()):
            st = _lstat(path)
            if st is None or not stat.S_ISDIR(st.st_mode):
                continue
            os.utime(path, (mtime, mtime), follow_symlinks=False)


def extract(
    fileobj: IO[bytes], dest: str, *, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES
) -> tuple[int, int]:
    """Extract the tar read from fileobj (a stream) into directory dest.

    The rule is the Go client's (client.DownloadDir): a symbolic link entry
    is made as it is, whatever its target (a virtualenv's ``bin/python ->
    /usr/bin/python3`` comes back as that link), but nothing is ever written
    through a link: an entry whose parent path passes through a symbolic
    link (one the archive made, or one already in dest) is refused, and so
    is a file or directory entry whose own name is a link already. Absolute
    names, '..' components, device files and FIFOs are refused; a hard link
    must name a file (or link) inside dest, reached without links, and is
    copied (a link to a link makes the same link again). More than
    max_entries entries or max_bytes bytes of files raise
    ArchiveTooLargeError.

    Returns (files, bytes) written. Raises UnsafeArchiveError on the first
    entry that is not safe; what was extracted before it stays.
    """
    reader = Reader(fileobj, max_bytes, max_entries)
    os.makedirs(dest, exist_ok=True)
    return _Extractor(reader, os.path.realpath(dest), dest).run()


def source_name(remote: str) -> str:
    """The own name of a sandbox path as the caller gave it ('' for a
    directory's contents: "x/.", ".", "/")."""
    if remote == "." or remote.endswith("/."):
        return ""
    name = remote.rstrip("/").rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        return ""
    return name


def download(
    fileobj: IO[bytes],
    local: str,
    name: str,
    *,
    merge: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> tuple[int, int]:
    """Write the archive of a sandbox path whose own name is `name` to
    `local`, deciding from the archive, never from a stat, whether it is one
    file or a directory.

    It is one file only when the archive holds exactly one entry, a regular
    file or a symbolic link named `name`. That entry is staged under a
    temporary name beside where it lands until the archive's end proves it
    alone: then `local` becomes that file (or, when `local` is an existing
    directory, the file lands inside it as local/name; an existing directory
    there is never replaced). Anything else is a directory's contents:
    `local` becomes that directory (made with its parents when missing); a
    file there is refused, and an existing directory is only extracted into
    with merge=True. The names written come from `local`, `name` and the
    archive's checked entries only. Returns (files, bytes) written.
    """
    reader = Reader(fileobj, max_bytes, max_entries)
    first = reader.next()
    st = _stat(local)
    local_is_dir = st is not None and stat.S_ISDIR(st.st_mode)
    one = (
        bool(name)
        and first is not None
        and (first.isreg() or first.issym())
        and _parts(first.name, "entry") == [name]
    )
    staged = None
    try:
        if one:
            assert first is not None
            stage_dir = local if local_is_dir else os.path.dirname(os.path.abspath(local))
            os.makedirs(stage_dir, exist_ok=True)
            staged = os.path.join(stage_dir, f".withruntime-{secrets.token_hex(6)}")
            if first.issym():
                os.symlink(first.linkname, staged)
            else:
                _write_new(staged, reader.data(first), first.mode, first.mtime)
            nxt = reader.next()
            if nxt is None:
                target = os.path.join(local, name) if local_is_dir else local
                tst = _lstat(target)
                if tst is not None and stat.S_ISDIR(tst.st_mode):
                    raise DestinationError(f"refusing to replace the directory {target} with a file")
                os.replace(staged, target)
                staged = None
                return 1, first.size if first.isreg() else 0
        else:
            nxt = first
        # A directory's contents.
        if st is not None and not local_is_dir:
            raise DestinationError(f"cannot copy a directory onto the file {local}")
        if local_is_dir and not merge:
            raise DestinationError(
                f"{local} is an existing directory: pass merge=True to extract the sandbox's directory into it, "
                "or name a path that does not exist"
            )
        os.makedirs(local, exist_ok=True)
        x = _Extractor(reader, os.path.realpath(local), local)
        if staged is not None:
            assert first is not None
            x.place(staged, name, first.issym(), first.size if first.isreg() else 0)
            staged = None
        if nxt is None:  # an empty directory
            x.finish()
            return x.files, x.size
        return x.run(nxt)
    finally:
        if staged is not None:
            try:
                os.unlink(staged)
            except OSError:
                pass


def _stat(path: str) -> os.stat_result | None:
    """The local destination is the user's own: its links are followed."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
