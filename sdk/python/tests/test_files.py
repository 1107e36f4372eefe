"""sbx.files: single files, directory trees as streamed tars, and the safety
of extracting an archive that came from an untrusted sandbox."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from withruntime import APIError, Error, FileInfo, Sandbox, TransportError
from withruntime import _archive


def test_write_read_stat_list(fake, sbx: Sandbox) -> None:
    info = sbx.files.write("dir/a.txt", "héllo\n")
    assert isinstance(info, FileInfo)
    assert (info.path, info.type, info.size) == ("/workspace/dir/a.txt", "file", 7)
    put = [r for r in fake.state.requests if r.method == "PUT"][-1]
    assert put.query == {"path": "dir/a.txt", "mode": "0644"}
    assert sbx.files.read("dir/a.txt") == "héllo\n"
    assert sbx.files.read_bytes("/workspace/dir/a.txt") == "héllo\n".encode()
    sbx.files.write("bin.dat", b"\x00\x01", mode=0o755)
    assert fake.state.modes["/workspace/bin.dat"] == 0o755
    assert sbx.files.stat("dir").is_dir
    assert [(e.name, e.type) for e in sbx.files.list()] == [("bin.dat", "file"), ("dir", "dir")]
    assert [e.name for e in sbx.files.list("dir")] == ["a.txt"]


def test_exists_mkdir_remove(fake, sbx: Sandbox) -> None:
    assert not sbx.files.exists("nope")
    assert sbx.files.mkdir("x/y").is_dir
    assert sbx.files.exists("x/y")
    sbx.files.write("x/y/f", "1")
    with pytest.raises(APIError) as e:
        sbx.files.remove("x")
    assert e.value.code == "conflict"
    sbx.files.remove("x", recursive=True)
    assert not sbx.files.exists("x")
    assert [r.query for r in fake.state.requests if r.method == "DELETE"][-1] == {"path": "x", "recursive": "true"}


def test_read_missing_is_not_found(sbx: Sandbox) -> None:
    with pytest.raises(APIError) as e:
        sbx.files.read("missing.txt")
    assert (e.value.code, e.value.status) == ("not_found", 404)


def make_tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("")
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "empty").mkdir()
    (root / "data.bin").write_bytes(os.urandom(3 << 20))
    (root / "link").symlink_to("src/main.py")


def test_upload_and_download_directory_round_trip(fake, sbx: Sandbox, tmp_path: Path) -> None:
    src = tmp_path / "src_tree"
    src.mkdir()
    make_tree(src)
    res = sbx.files.upload(src, "/workspace/proj")
    assert (res.files, res.bytes) == (5, (3 << 20) + len("print('hi')\n") + len("#!/bin/sh\necho run\n"))
    put = [r for r in fake.state.requests if r.path.endswith("/archive")][-1]
    assert put.method == "PUT" and put.query == {"path": "/workspace/proj"}
    assert put.chunked and put.chunks > 3, "the tar was sent as a chunked stream, piece by piece"
    assert put.headers["content-type"] == "application/x-tar"
    assert fake.state.links["/workspace/proj/link"] == "src/main.py"
    assert fake.state.modes["/workspace/proj/run.sh"] == 0o755

    out = tmp_path / "out"
    res2 = sbx.files.download("/workspace/proj", out)
    assert res2.files == 5
    for rel in ["src/pkg/__init__.py", "src/main.py", "run.sh", "data.bin"]:
        assert (out / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert (out / "empty").is_dir()
    assert os.readlink(out / "link") == "src/main.py"
    assert os.stat(out / "run.sh").st_mode & 0o777 == 0o755


def test_upload_and_download_single_file(fake, sbx: Sandbox, tmp_path: Path) -> None:
    f = tmp_path / "script.py"
    f.write_text("print(42)\n")
    f.chmod(0o700)
    res = sbx.files.upload(f, "bin/script.py")
    assert (res.files, res.bytes) == (1, 10)
    put = [r for r in fake.state.requests if r.method == "PUT"][-1]
    assert put.query == {"path": "bin/script.py", "mode": "0700"}
    assert not put.chunked
    back = tmp_path / "nested" / "back.py"
    assert sbx.files.download("bin/script.py", back).bytes == 10
    assert back.read_text() == "print(42)\n"
    assert os.stat(back).st_mode & 0o777 == 0o700


def test_upload_missing_local_path(sbx: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sbx.files.upload(tmp_path / "nope", "x")


def test_tar_stream_is_chunked_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (5 << 20))
    for i in range(50):
        (tmp_path / f"small{i}").write_text(str(i))
    chunks = list(_archive.tar_stream(str(tmp_path)))
    assert len(chunks) > 5
    assert max(len(c) for c in chunks) <= _archive.CHUNK + (512 << 10)
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tf:
        names = tf.getnames()
        assert "big" in names and "small49" in names
        assert tf.extractfile("big").read() == b"x" * (5 << 20)  # type: ignore[union-attr]


# -- extraction safety -------------------------------------------------------


def tar_of(*entries: tuple) -> bytes:
    """Build a tar: (name, kind, payload) with kind file/dir/sym/hard/chr/fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, payload in entries:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode() if isinstance(payload, str) else payload
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {
                "dir": tarfile.DIRTYPE,
                "sym": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            if kind in ("sym", "hard"):
                ti.linkname = payload
            tf.addfile(ti)
    return buf.getvalue()


def download_crafted(fake, sbx: Sandbox, tmp_path: Path, tar: bytes) -> Path:
    sbx.files.mkdir("d")
    fake.state.archive_override = tar
    dest = tmp_path / "dest"
    sbx.files.download("d", dest)
    return dest


UNSAFE = {
    "dotdot": [("../evil.txt", "file", "x")],
    "dotdot_inside": [("a/../../evil.txt", "file", "x")],
    "absolute": [("/tmp/evil.txt", "file", "x")],
    "symlink_absolute": [("l", "sym", "/etc")],
    "symlink_outside": [("l", "sym", "../../outside")],
    "symlink_chain_outside": [("s", "sym", "."), ("t", "sym", "s/..")],
    "symlink_made_later_escapes": [("t", "sym", "s/.."), ("s", "sym", ".")],
    "write_through_symlink": [("t", "sym", "s/.."), ("s", "sym", "."), ("t/evil.txt", "file", "x")],
    "hardlink_outside": [("h", "hard", "../../etc/passwd")],
    "hardlink_absolute": [("h", "hard", "/etc/passwd")],
    "char_device": [("dev", "chr", None)],
    "fifo": [("pipe", "fifo", None)],
}


@pytest.mark.parametrize("case", list(UNSAFE))
def test_unsafe_archives_are_refused(fake, sbx: Sandbox, tmp_path: Path, case: str) -> None:
    before = set(os.listdir(tmp_path))
    with pytest.raises(Error) as e:
        download_crafted(fake, sbx, tmp_path, tar_of(*UNSAFE[case]))
    assert "refusing" in str(e.value)
    # Nothing escaped next to the destination or above it.
    assert set(os.listdir(tmp_path)) - before <= {"dest"}
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path.parent / "evil.txt").exists()
    dest = tmp_path / "dest"
    for dirpath, dirnames, filenames in os.walk(dest):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                real = os.path.realpath(p)
                assert real == str(dest.resolve()) or real.startswith(str(dest.resolve()) + os.sep), p


def test_safe_links_and_dot_names_are_kept(fake, sbx: Sandbox, tmp_path: Path) -> None:
    tar = tar_of(
        ("./", "dir", None),
        ("./a/", "dir", None),
        ("./a/f.txt", "file", "content"),
        ("b", "sym", "a/f.txt"),
        ("a/up", "sym", "../a"),
        ("c", "hard", "a/f.txt"),
    )
    dest = download_crafted(fake, sbx, tmp_path, tar)
    assert (dest / "a" / "f.txt").read_text() == "content"
    assert os.readlink(dest / "b") == "a/f.txt" and (dest / "b").read_text() == "content"
    assert (dest / "a" / "up" / "f.txt").read_text() == "content"
    assert (dest / "c").read_text() == "content"


def test_existing_symlink_in_destination_is_not_written_through(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    fake.state.archive_override = tar_of(("sub/evil.txt", "file", "x"))
    sbx.files.mkdir("d")
    with pytest.raises(Error, match="refusing"):
        sbx.files.download("d", dest)
    assert not (outside / "evil.txt").exists()


def test_file_replacing_a_symlink_replaces_the_link(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "f").symlink_to(outside)
    fake.state.archive_override = tar_of(("f", "file", "new"))
    sbx.files.mkdir("d")
    sbx.files.download("d", dest)
    assert outside.read_text() == "keep"
    assert not (dest / "f").is_symlink() and (dest / "f").read_text() == "new"


def test_cut_archive_is_transport_error(fake, sbx: Sandbox, tmp_path: Path) -> None:
    full = tar_of(("f", "file", "x" * 5000))
    with pytest.raises(TransportError):
        download_crafted(fake, sbx, tmp_path, full[:1024])
