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


# The rule is the Go client's (client.DownloadDir): links are made as they
# are, whatever their target, but nothing is written through one and no
# entry's parent path passes through one. Each case gets `outside`, a
# directory beside the destination holding one file, "secret".
UNSAFE = {
    "dotdot": lambda o: [("../evil.txt", "file", "x")],
    "dotdot_inside": lambda o: [("a/../../evil.txt", "file", "x")],
    "absolute": lambda o: [(f"{o}/evil.txt", "file", "x")],
    "through_symlink_out": lambda o: [("l", "sym", o), ("l/evil.txt", "file", "x")],
    "through_relative_symlink_out": lambda o: [("l", "sym", "../outside"), ("l/evil.txt", "file", "x")],
    "through_symlink_in": lambda o: [("sub/", "dir", None), ("l", "sym", "sub"), ("l/evil.txt", "file", "x")],
    "dir_through_symlink": lambda o: [("l", "sym", o), ("l/", "dir", None), ("l/d/", "dir", None)],
    "deep_through_symlink": lambda o: [("l", "sym", o), ("l/a/b/evil.txt", "file", "x")],
    "file_over_symlink": lambda o: [("f", "sym", f"{o}/secret"), ("f", "file", "x")],
    "chain_of_links": lambda o: [("t", "sym", "s/.."), ("s", "sym", "."), ("t/evil.txt", "file", "x")],
    "hardlink_outside": lambda o: [("h", "hard", "../outside/secret")],
    "hardlink_absolute": lambda o: [("h", "hard", f"{o}/secret")],
    "hardlink_through_symlink": lambda o: [("l", "sym", o), ("h", "hard", "l/secret")],
    "hardlink_to_missing": lambda o: [("h", "hard", "nothing")],
    "char_device": lambda o: [("dev", "chr", None)],
    "fifo": lambda o: [("pipe", "fifo", None)],
}


def check_outside_untouched(tmp_path: Path, outside: Path) -> None:
    assert sorted(os.listdir(outside)) == ["secret"] and (outside / "secret").read_text() == "s"
    assert set(os.listdir(tmp_path)) <= {"dest", "outside"}
    assert not (tmp_path.parent / "evil.txt").exists()
    dest = tmp_path / "dest"
    for dirpath, _, filenames in os.walk(dest):  # os.walk does not enter links
        for n in filenames:
            p = Path(dirpath) / n
            if not p.is_symlink():
                assert p.read_bytes() != b"s", f"{p}: the outside secret was copied in"


def make_outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    return outside


@pytest.mark.parametrize("case", list(UNSAFE))
def test_unsafe_archives_are_refused(fake, sbx: Sandbox, tmp_path: Path, case: str) -> None:
    outside = make_outside(tmp_path)
    with pytest.raises(Error) as e:
        download_crafted(fake, sbx, tmp_path, tar_of(*UNSAFE[case](str(outside))))
    assert "refusing" in str(e.value)
    check_outside_untouched(tmp_path, outside)


def test_safe_links_and_dot_names_are_kept(fake, sbx: Sandbox, tmp_path: Path) -> None:
    tar = tar_of(
        ("./", "dir", None),
        ("./a/", "dir", None),
        ("./a/f.txt", "file", "content"),
        ("b", "sym", "a/f.txt"),
        ("a/up", "sym", "../a"),
        ("c", "hard", "a/f.txt"),
        ("new/parent/d.txt", "file", "d"),  # parents not in the archive
        ("e..f", "file", "dots in a name are fine"),
        ("g:h\\i", "file", "so are colons and backslashes on POSIX"),
    )
    dest = download_crafted(fake, sbx, tmp_path, tar)
    assert (dest / "a" / "f.txt").read_text() == "content"
    assert os.readlink(dest / "b") == "a/f.txt" and (dest / "b").read_text() == "content"
    assert (dest / "a" / "up" / "f.txt").read_text() == "content"
    assert (dest / "c").read_text() == "content" and not (dest / "c").is_symlink()
    assert (dest / "new" / "parent" / "d.txt").read_text() == "d"
    assert (dest / "e..f").exists()
    if os.name != "nt":
        assert (dest / "g:h\\i").exists()


def test_venv_like_tree_with_absolute_links_downloads(fake, sbx: Sandbox, tmp_path: Path) -> None:
    """A virtualenv holds links to the system's Python: they come back as
    links, pointing where they pointed, and are never followed."""
    outside = make_outside(tmp_path)
    tar = tar_of(
        ("venv/", "dir", None),
        ("venv/bin/", "dir", None),
        ("venv/bin/python3", "sym", "/usr/bin/python3"),
        ("venv/bin/python", "sym", "python3"),
        ("venv/bin/python3.13", "sym", "python3"),
        ("venv/bin/activate", "file", "# activate\n"),
        ("venv/lib/", "dir", None),
        ("venv/lib/python3.13/site-packages/mod.py", "file", "X = 1\n"),
        ("venv/lib64", "sym", "lib"),
        ("venv/pyvenv.cfg", "file", "home = /usr/bin\n"),
        ("venv/secret-link", "sym", f"{outside}/secret"),
        ("venv/dangling", "sym", "/nonexistent/anywhere"),
        ("venv/up", "sym", "../../.."),
        ("venv/same-secret", "hard", "venv/secret-link"),  # a hard link to a link is that link
    )
    dest = download_crafted(fake, sbx, tmp_path, tar)
    v = dest / "venv"
    assert os.readlink(v / "bin" / "python3") == "/usr/bin/python3"
    assert os.readlink(v / "bin" / "python") == "python3"
    assert os.readlink(v / "lib64") == "lib"
    assert os.readlink(v / "secret-link") == f"{outside}/secret"
    assert os.readlink(v / "same-secret") == f"{outside}/secret"
    assert os.readlink(v / "dangling") == "/nonexistent/anywhere"
    assert os.readlink(v / "up") == "../../.."
    assert (v / "lib" / "python3.13" / "site-packages" / "mod.py").read_text() == "X = 1\n"
    assert (v / "pyvenv.cfg").read_text() == "home = /usr/bin\n"
    check_outside_untouched(tmp_path, outside)


def test_existing_symlink_in_destination_is_not_written_through(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = make_outside(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    fake.state.archive_override = tar_of(("sub/evil.txt", "file", "x"))
    sbx.files.mkdir("d")
    with pytest.raises(Error, match="refusing"):
        sbx.files.download("d", dest, merge=True)
    check_outside_untouched(tmp_path, outside)


def test_file_over_an_existing_symlink_is_refused(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = make_outside(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "f").symlink_to(outside / "secret")
    fake.state.archive_override = tar_of(("f", "file", "new"))
    sbx.files.mkdir("d")
    with pytest.raises(Error, match="refusing .*symbolic link"):
        sbx.files.download("d", dest, merge=True)
    check_outside_untouched(tmp_path, outside)
    assert os.readlink(dest / "f") == str(outside / "secret")


def test_link_over_an_existing_link_replaces_it(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = make_outside(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "l").symlink_to(outside)
    (dest / "f").write_text("old")
    fake.state.archive_override = tar_of(("l", "sym", "/usr/bin/python3"), ("f", "sym", "l"))
    sbx.files.mkdir("d")
    assert sbx.files.download("d", dest, merge=True).files == 2
    assert os.readlink(dest / "l") == "/usr/bin/python3" and os.readlink(dest / "f") == "l"
    check_outside_untouched(tmp_path, outside)


def test_refused_entry_keeps_what_came_before(fake, sbx: Sandbox, tmp_path: Path) -> None:
    outside = make_outside(tmp_path)
    tar = tar_of(("a.txt", "file", "a"), ("l", "sym", str(outside)), ("l/evil.txt", "file", "x"), ("z.txt", "file", "z"))
    with pytest.raises(Error, match="passes through the symbolic link"):
        download_crafted(fake, sbx, tmp_path, tar)
    dest = tmp_path / "dest"
    assert (dest / "a.txt").read_text() == "a" and os.readlink(dest / "l") == str(outside)
    assert not (dest / "z.txt").exists()
    check_outside_untouched(tmp_path, outside)


def test_cut_archive_is_transport_error(fake, sbx: Sandbox, tmp_path: Path) -> None:
    full = tar_of(("f", "file", "x" * 5000))
    with pytest.raises(TransportError):
        download_crafted(fake, sbx, tmp_path, full[:1024])
