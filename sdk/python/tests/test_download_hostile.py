"""sbx.files.download against a hostile sandbox (issue 22): the archive, not
an earlier stat, says whether a file or a directory came; names come from
the caller's arguments; an existing directory is filled only when asked; and
the archive's entries and bytes are bounded."""

from __future__ import annotations

import io
import os
import tarfile
import time
import tracemalloc
from pathlib import Path

import pytest

from test_files import tar_of
from withruntime import Error, Sandbox
from withruntime import _archive
from withruntime._archive import ArchiveTooLargeError, DestinationError


def tree(root: Path) -> list[str]:
    """Every path under root: "rel/" for a directory, "rel=content" for a
    file, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out.append(os.path.relpath(os.path.join(dirpath, d), root) + "/")
        for f in filenames:
            p = os.path.join(dirpath, f)
            out.append(os.path.relpath(p, root) + "=" + Path(p).read_text())
    return sorted(out)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """base/.bashrc, base/home/.bashrc and base/home/proj/: the user's."""
    (tmp_path / "home" / "proj").mkdir(parents=True)
    (tmp_path / ".bashrc").write_text("mine")
    (tmp_path / "home" / ".bashrc").write_text("mine")
    return tmp_path


BEFORE = [".bashrc=mine", "home/", "home/.bashrc=mine", "home/proj/"]

# (name, sandbox side: "file" or "dir" as its stat would say, remote, local
# under base, archive entries, merge, the error expected, the paths added
# to BEFORE)
CASES = [
    # The race of issue 22: the stat saw a directory the user meant to
    # merge... or rather any directory: onto an existing directory it is
    # refused unless merge=True, so .bashrc stays.
    ("a directory onto an existing directory is refused", "dir", "out.txt", "home",
     [(".bashrc", "file", "pwned")], False, DestinationError, []),
    ("a file that turned into a directory is refused onto a directory", "file", "out.txt", "home",
     [("out.txt", "file", "x"), (".bashrc", "file", "pwned")], False, DestinationError, []),
    ("one file onto an existing directory lands inside under its own name", "dir", "/workspace/out.txt", "home",
     [("out.txt", "file", "data")], False, None, ["home/out.txt=data"]),
    ("one file's name comes from the argument, never the archive", "file", "out.txt", "home",
     [(".bashrc", "file", "pwned")], False, DestinationError, []),
    ("one file onto a missing path becomes it", "file", "out.txt", "home/new.txt",
     [("out.txt", "file", "data")], False, None, ["home/new.txt=data"]),
    ("one file onto a file replaces it", "file", "out.txt", "home/.bashrc",
     [("out.txt", "file", "data")], False, None, ["-home/.bashrc=mine", "home/.bashrc=data"]),
    ("one file onto a directory of its name is refused", "file", "proj", "home",
     [("proj", "file", "data")], False, DestinationError, []),
    ("a directory onto a missing path becomes it", "dir", "results", "home/r",
     [("a/", "dir", None), ("a/b", "file", "b")], False, None, ["home/r/", "home/r/a/", "home/r/a/b=b"]),
    ("a first entry with the source's name, then more, is a directory", "file", "out.txt", "home/r",
     [("out.txt", "file", "first"), (".bashrc", "file", "pwned")], False, None,
     ["home/r/", "home/r/out.txt=first", "home/r/.bashrc=pwned"]),
    ("a directory onto a file is refused", "dir", "results", "home/.bashrc",
     [("x", "file", "x")], False, DestinationError, []),
    ("merge=True extracts into an existing directory", "dir", "results", "home/proj",
     [("x", "file", "x")], True, None, ["home/proj/x=x"]),
    ("an empty archive is an empty directory", "dir", "empty", "home/e", [], False, None, ["home/e/"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_download_decides_from_the_archive(fake, sbx: Sandbox, base: Path, case) -> None:
    _, side, remote, local, entries, merge, want_err, added = case
    # What the sandbox's stat would answer: the old code trusted it.
    if side == "dir":
        sbx.files.mkdir(remote)
    else:
        sbx.files.write(remote, "stat says a file")
    fake.state.archive_override = tar_of(*entries)
    if want_err is None:
        sbx.files.download(remote, base / local, merge=merge)
    else:
        with pytest.raises(want_err):
            sbx.files.download(remote, base / local, merge=merge)
    want = [p for p in BEFORE if "-" + p not in added] + [p for p in added if not p.startswith("-")]
    assert tree(base) == sorted(want)


def test_a_refused_file_leaves_no_temporary_file(fake, sbx: Sandbox, base: Path) -> None:
    sbx.files.write("out.txt", "x")
    fake.state.archive_override = tar_of(("out.txt", "file", "first"), ("../../evil", "file", "x"))
    with pytest.raises(Error, match="refusing"):
        sbx.files.download("out.txt", base / "home" / "r")
    assert not [n for n in os.listdir(base / "home") if n.startswith(".withruntime-")]
    assert not (base.parent / "evil").exists()


def many(n: int, name: str = "d/", kind: bytes = tarfile.DIRTYPE, size: int = 0) -> io.RawIOBase:
    """A tar stream of n entries, made as it is read: bounded memory on the
    sending side too. `sent` counts the bytes read from it."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    block = info.tobuf(tarfile.USTAR_FORMAT) + b"\0" * (size + -size % 512)

    class Stream(io.RawIOBase):
        sent = 0
        left = n
        end = b"\0" * 1024  # the two zero blocks after the last entry

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:  # type: ignore[override]
            if self.left > 0:
                k = max(1, min(len(b) // len(block), self.left))
                data = (block * k)[: len(b)]
                self.left -= k
            else:
                data, self.end = self.end[: len(b)], self.end[len(b) :]
            b[: len(data)] = data
            self.sent += len(data)
            return len(data)

    return Stream()


@pytest.mark.parametrize(
    "stream, kwargs, want",
    [
        (lambda: many(11), {"max_entries": 10}, "more than 10 entries"),
        (lambda: many(3, "f", tarfile.REGTYPE, 600), {"max_bytes": 1000}, "more than 1000 bytes of files"),
        (lambda: many(1, "big", tarfile.REGTYPE, 0), {}, None),
        (lambda: many(1 << 40), {"max_entries": 100}, "more than 100 entries"),
    ],
    ids=["entries", "bytes", "within", "endless"],
)
def test_bounds(tmp_path: Path, stream, kwargs, want) -> None:
    s = stream()
    if want is None:
        assert _archive.download(s, str(tmp_path / "out"), "big", **kwargs) == (1, 0)
        return
    with pytest.raises(ArchiveTooLargeError, match=want):
        _archive.download(s, str(tmp_path / "out"), "x", **kwargs)
    assert s.sent < 1 << 20, f"read {s.sent} bytes of the archive, want the bound's worth"


def test_a_file_announced_past_the_default_bound_is_refused_before_its_bytes(tmp_path: Path) -> None:
    info = tarfile.TarInfo("big")
    info.size = _archive.DEFAULT_MAX_BYTES + 1
    s = io.BytesIO(info.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096)
    with pytest.raises(ArchiveTooLargeError, match="bytes of files"):
        _archive.download(s, str(tmp_path / "big"), "big")
    assert os.listdir(tmp_path) == []


def test_headers_without_entries_stop_at_the_archive_bound(tmp_path: Path) -> None:
    """PAX extended headers one after another are no entry: only the bound on
    the archive's own bytes ends them (or Python's recursion limit)."""
    info = tarfile.TarInfo("d/")
    info.type, info.pax_headers = tarfile.DIRTYPE, {"comment": "x" * 300}
    pax = info.tobuf(tarfile.PAX_FORMAT)[:1024]  # the "x" header and its records
    s = io.BytesIO(pax * 200_000)
    with pytest.raises((ArchiveTooLargeError, tarfile.TarError)):
        _archive.download(s, str(tmp_path / "out"), "x", max_entries=10, max_bytes=1000)
    assert s.tell() <= 1000 + 11 * 4096 + 1024 * 1100


def test_many_entries_keep_memory_flat(tmp_path: Path) -> None:
    """50,001 entries against max_entries=50,000: tarfile's list of members
    would hold every header; the reader empties it."""
    n = 50_000
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(ArchiveTooLargeError, match=f"more than {n} entries"):
            _archive.download(many(n + 1), str(tmp_path / "out"), "x", max_entries=n)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"{n + 1} entries refused in {time.monotonic() - start:.1f}s, peak traced memory {peak >> 10} KiB")
    assert peak < 8 << 20, f"peak {peak} bytes, want under 8 MiB"
