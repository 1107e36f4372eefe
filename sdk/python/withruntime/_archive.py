"""Directories as one streamed tar: written chunk by chunk for uploads,
extracted safely for downloads.

Writing does not go through tarfile.open (which wants a file to write to):
each entry's header comes from TarInfo.tobuf, its data is read from disk in
chunks, so a tree of any size is sent with bounded memory.

Extraction refuses, with withruntime.Error, any entry that would land outside
the destination: absolute names, ``..`` components, links whose target
resolves outside, writes through a link that resolves outside, and device
files or FIFOs. The checks resolve real paths at each step, so links that
the archive itself created earlier are followed as the filesystem would.
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


class UnsafeArchiveError(Error):
    """An archive entry would have been written outside its destination."""


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


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parts(name: str, what: str) -> list[str]:
    """The components of an archive name, refusing absolute names and '..'."""
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"refusing {what} {name!r}: absolute name")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"refusing {what} {name!r}: it contains '..'")
    return parts


def _drop_escaping_links(links: list[tuple[str, str]], root: str) -> str | None:
    """Remove the links that resolve outside root; the first one's name."""
    first = None
    for path, name in links:
        if os.path.islink(path) and not _inside(os.path.realpath(path), root):
            os.unlink(path)
            first = first or name
    return first


def extract(fileobj: IO[bytes], dest: str) -> tuple[int, int]:
    """Extract the tar read from fileobj (a stream) into directory dest.

    Returns (files, bytes) written. Raises UnsafeArchiveError on the first
    entry that is not safe; what was extracted before it stays.
    """
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    files = size = 0
    dirs: list[tuple[str, int, int]] = []
    links: list[tuple[str, str]] = []

    try:
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
                parent = os.path.realpath(os.path.join(root, *parts[:-1]))
                if not _inside(parent, root):
                    raise UnsafeArchiveError(f"refusing entry {m.name!r}: its directory resolves outside {dest}")
                os.makedirs(parent, exist_ok=True)
                target = os.path.join(parent, parts[-1])

                if m.isdir():
                    if os.path.islink(target) or (os.path.lexists(target) and not os.path.isdir(target)):
                        os.unlink(target)
                    os.makedirs(target, exist_ok=True)
                    dirs.append((target, m.mode, int(m.mtime)))
                    continue

                if os.path.isdir(target) and not os.path.islink(target):
                    raise UnsafeArchiveError(f"refusing entry {m.name!r}: a directory of that name exists")
                if os.path.lexists(target):
                    os.unlink(target)

                if m.issym():
                    link = m.linkname
                    if os.path.isabs(link):
                        raise UnsafeArchiveError(f"refusing link {m.name!r} -> {link!r}: absolute target")
                    if not _inside(os.path.realpath(os.path.join(parent, link)), root):
                        raise UnsafeArchiveError(f"refusing link {m.name!r} -> {link!r}: it points outside {dest}")
                    os.symlink(link, target)
                    links.append((target, m.name))
                    files += 1
                elif m.islnk():
                    src = os.path.realpath(os.path.join(root, *_parts(m.linkname, "hard link target")))
                    if not _inside(src, root) or not os.path.isfile(src):
                        raise UnsafeArchiveError(
                            f"refusing hard link {m.name!r} -> {m.linkname!r}: no such file inside {dest}"
                        )
                    shutil.copyfile(src, target)
                    files += 1
                    size += os.path.getsize(target)
                else:
                    src_f = tf.extractfile(m)
                    fd = os.open(target, _CREATE_FLAGS, 0o600)
                    with os.fdopen(fd, "wb") as out:
                        if src_f is not None:
                            shutil.copyfileobj(src_f, out, CHUNK)
                    os.chmod(target, m.mode & 0o777)
                    os.utime(target, (m.mtime, m.mtime))
                    files += 1
                    size += m.size
    except BaseException:
        # Whatever stopped the extraction, leave no link that leads outside.
        _drop_escaping_links(links, root)
        raise
    # A link that was inside when made may point outside once later entries
    # changed what its target resolves through: check them all again.
    bad = _drop_escaping_links(links, root)
    if bad:
        raise UnsafeArchiveError(f"refusing link {bad!r}: it resolves outside {dest}")
    # Directory modes last, so a read-only directory does not block its own
    # entries; the owner always keeps rwx.
    for path, mode, mtime in reversed(dirs):
        os.chmod(path, (mode & 0o777) | 0o700)
        os.utime(path, (mtime, mtime))
    return files, size
