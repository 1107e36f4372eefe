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
"""

from __future__ import annotations

import os
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


class UnsafeArchiveError(Error):
    """An archive entry is refused: it would be written outside its
    destination, through a symbolic link, or is a special file."""


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


def extract(fileobj: IO[bytes], dest: str) -> tuple[int, int]:
    """Extract the tar read from fileobj (a stream) into directory dest.

    The rule is the Go client's (client.DownloadDir): a symbolic link entry
    is made as it is, whatever its target (a virtualenv's ``bin/python ->
    /usr/bin/python3`` comes back as that link), but nothing is ever written
    through a link: an entry whose parent path passes through a symbolic
    link (one the archive made, or one already in dest) is refused, and so
    is a file or directory entry whose own name is a link already. Absolute
    names, '..' components, device files and FIFOs are refused; a hard link
    must name a file (or link) inside dest, reached without links, and is
    copied (a link to a link makes the same link again).

    Returns (files, bytes) written. Raises UnsafeArchiveError on the first
    entry that is not safe; what was extracted before it stays.
    """
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    files = size = 0
    dirs: list[tuple[str, int, int]] = []

    with tarfile.open(fileobj=fileobj, mode="r|") as tf:
        for m in tf:
            parts = _parts(m.name, "entry")
            if not parts:
                if m.isdir():
                    continue
                raise UnsafeArchiveError(f"refusing entry {m.name!r}: it names the destination itself")
            if not (m.isdir() or m.isreg() or m.issym() or m.islnk()):
                raise UnsafeArchiveError(
                    f"refusing entry {m.name!r}: device files, FIFOs and other special files are not extracted"
                )
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
                dirs.append((target, m.mode, int(m.mtime)))
                continue

            if is_dir:
                raise UnsafeArchiveError(f"refusing entry {m.name!r}: a directory of that name exists")

            if m.issym():
                if st is not None:
                    os.unlink(target)  # replaced, never followed
                os.symlink(m.linkname, target)
                files += 1
            elif m.islnk():
                src_parts = _parts(m.linkname, "hard link target")
                if not src_parts:
                    raise UnsafeArchiveError(f"refusing hard link {m.name!r}: it names the destination itself")
                src = os.path.join(_parent(root, src_parts, m.linkname, create=False), src_parts[-1])
                src_st = _lstat(src)
                if src_st is None or not (stat.S_ISREG(src_st.st_mode) or stat.S_ISLNK(src_st.st_mode)):
                    raise UnsafeArchiveError(
                        f"refusing hard link {m.name!r} -> {m.linkname!r}: no such file inside {dest}"
                    )
                if src == target:
                    continue  # a link to itself: the file is there already
                if st is not None:
                    os.unlink(target)
                if stat.S_ISLNK(src_st.st_mode):
                    os.symlink(os.readlink(src), target)
                else:
                    with os.fdopen(os.open(src, _READ_FLAGS), "rb") as src_f:
                        _write_new(target, src_f, src_st.st_mode, src_st.st_mtime)
                    size += src_st.st_size
                files += 1
            else:
                if is_link:
                    raise UnsafeArchiveError(f"refusing entry {m.name!r}: {target} is a symbolic link")
                if st is not None:
                    os.unlink(target)
                _write_new(target, tf.extractfile(m), m.mode, m.mtime)
                files += 1
                size += m.size

    # Directory modes last, so a read-only directory does not block its own
    # entries; the owner always keeps rwx. Never follow a link here either.
    for path, mode, mtime in reversed(dirs):
        st = _lstat(path)
        if st is None or not stat.S_ISDIR(st.st_mode):
            continue
        os.chmod(path, (mode & 0o777) | 0o700)
        os.utime(path, (mtime, mtime))
    return files, size
