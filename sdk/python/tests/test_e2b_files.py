"""The unmodified e2b SDK's sandbox.files against withruntime's E2B API:
the filesystem RPCs and /files of port 49983, over a real sandbox. What
the E2B client writes is read back through withruntime's own SDK too, so
the two views are of one real filesystem."""

from __future__ import annotations

import io
import os
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402
from e2b import FileType  # noqa: E402
from e2b.exceptions import FileNotFoundException  # noqa: E402
from e2b.sandbox.filesystem.filesystem import WriteEntry  # noqa: E402


@pytest.fixture(scope="module")
def sbx(e2b_env: Any, live_server: dict[str, str]) -> Iterator[Any]:
    """One E2B sandbox for the module, killed at the end."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in dict(e2b_env).items():
            mp.setenv(k, v)
        s = e2b.Sandbox.create(timeout=600, metadata={"test": "e2b-files"})
        try:
            yield s
        finally:
            s.kill()


@pytest.fixture(scope="module")
def native(sbx: Any, live_server: dict[str, str]) -> withruntime.Sandbox:
    """The same sandbox through withruntime's own SDK."""
    return withruntime.Sandbox.connect(sbx.sandbox_id, **live_server)


def test_write_read_text_and_bytes(sbx: Any, native: withruntime.Sandbox) -> None:
    info = sbx.files.write("notes/hello.txt", "héllo\n")
    assert (info.path, info.name, info.type) == ("/home/user/notes/hello.txt", "hello.txt", FileType.FILE)
    assert sbx.files.read("notes/hello.txt") == "héllo\n"
    assert native.files.read("/home/user/notes/hello.txt") == "héllo\n"

    raw = bytes(range(256)) * 3
    sbx.files.write("/tmp/raw.bin", raw)
    assert sbx.files.read("/tmp/raw.bin", format="bytes") == raw
    assert native.files.read_bytes("/tmp/raw.bin") == raw
    stream = sbx.files.read("/tmp/raw.bin", format="stream")
    assert b"".join(stream) == raw

    sbx.files.write("empty.txt", "")
    assert sbx.files.read("empty.txt") == ""
    assert sbx.files.get_info("empty.txt").size == 0


def test_write_stream_and_iterable(sbx: Any, native: withruntime.Sandbox) -> None:
    big = os.urandom(3 << 20)
    info = sbx.files.write("stream.bin", io.BytesIO(big))
    assert info.path == "/home/user/stream.bin"
    assert native.files.read_bytes("/home/user/stream.bin") == big

    sbx.files.write("chunks.txt", iter([b"one ", b"two ", b"three"]))
    assert sbx.files.read("chunks.txt") == "one two three"

    sbx.files.write("zipped.txt", "compressed on the way", gzip=True)
    assert native.files.read("/home/user/zipped.txt") == "compressed on the way"


def test_write_several_files(sbx: Any, native: withruntime.Sandbox) -> None:
    infos = sbx.files.write_files(
        [
            WriteEntry(path="multi/a.txt", data="A"),
            WriteEntry(path="multi/sub/b.bin", data=b"\x00B"),
            WriteEntry(path="/tmp/multi-c.txt", data="C"),
        ]
    )
    assert [i.path for i in infos] == ["/home/user/multi/a.txt", "/home/user/multi/sub/b.bin", "/tmp/multi-c.txt"]
    assert native.files.read("/home/user/multi/a.txt") == "A"
    assert native.files.read_bytes("/home/user/multi/sub/b.bin") == b"\x00B"
    assert native.files.read("/tmp/multi-c.txt") == "C"


def test_list_exists_make_dir(sbx: Any) -> None:
    assert sbx.files.make_dir("tree/sub") is True
    assert sbx.files.make_dir("tree/sub") is False
    sbx.files.write("tree/top.txt", "t")
    sbx.files.write("tree/sub/deep.txt", "d")

    top = sbx.files.list("tree")
    assert sorted((e.name, e.type) for e in top) == [("sub", FileType.DIR), ("top.txt", FileType.FILE)]
    both = sbx.files.list("tree", depth=2)
    assert sorted(e.path for e in both) == [
        "/home/user/tree/sub",
        "/home/user/tree/sub/deep.txt",
        "/home/user/tree/top.txt",
    ]

    assert sbx.files.exists("tree/top.txt") is True
    assert sbx.files.exists("/home/user/tree/sub") is True
    assert sbx.files.exists("tree/none.txt") is False


def test_get_info_rename_remove(sbx: Any, native: withruntime.Sandbox) -> None:
    sbx.files.write("info.txt", "12345")
    info = sbx.files.get_info("info.txt")
    assert (info.name, info.path, info.type, info.size) == ("info.txt", "/home/user/info.txt", FileType.FILE, 5)
    assert info.permissions == "-rw-r--r--"
    assert info.mode & 0o777 == 0o644
    assert isinstance(info.modified_time, datetime)
    assert sbx.files.get_info("/home/user").type == FileType.DIR

    moved = sbx.files.rename("info.txt", "moved/renamed.txt")
    assert (moved.path, moved.name, moved.size) == ("/home/user/moved/renamed.txt", "renamed.txt", 5)
    assert sbx.files.exists("info.txt") is False
    assert native.files.read("/home/user/moved/renamed.txt") == "12345"

    sbx.files.remove("moved")
    assert sbx.files.exists("moved/renamed.txt") is False
    assert not native.files.exists("/home/user/moved")


def test_missing_paths(sbx: Any) -> None:
    with pytest.raises(FileNotFoundException):
        sbx.files.read("no/such/file.txt")
    with pytest.raises(FileNotFoundException):
        sbx.files.get_info("no/such/file.txt")
    with pytest.raises(FileNotFoundException):
        sbx.files.list("no/such/dir")
    with pytest.raises(FileNotFoundException):
        sbx.files.rename("no/such/file.txt", "elsewhere.txt")


def test_remove_missing_is_fine(sbx: Any) -> None:
    # As on E2B (and rm -f): removing what is not there succeeds.
    sbx.files.remove("no/such/file.txt")
    sbx.files.remove("/tmp/never-made")


def test_read_procfs(sbx: Any) -> None:
    # The kernel makes these files as they are read; their size is 0.
    boot = sbx.files.read("/proc/sys/kernel/random/boot_id").strip()
    assert len(boot) == 36 and boot.count("-") == 4
    assert sbx.files.read("/proc/self/status").startswith("Name:")


def test_symlink_entries(sbx: Any) -> None:
    # E2B's daemon describes a link by what it names, marked as a link (this
    # client then shows every link as a symlink), with symlink_target the
    # absolute path the link resolves to; a dangling link's is the path it
    # names.
    sbx.files.write("links/target.txt", "t")
    sbx.files.make_dir("links/dir")
    sbx.commands.run("ln -s target.txt to-file && ln -s dir to-dir && ln -s nothing dangling", cwd="/home/user/links")
    info = sbx.files.get_info("links/to-file")
    assert (info.type, info.symlink_target) == (FileType.SYMLINK, "/home/user/links/target.txt")
    listed = {e.name: (e.type, e.symlink_target) for e in sbx.files.list("links")}
    assert listed == {
        "dangling": (FileType.SYMLINK, "/home/user/links/nothing"),
        "dir": (FileType.DIR, None),
        "target.txt": (FileType.FILE, None),
        "to-dir": (FileType.SYMLINK, "/home/user/links/dir"),
        "to-file": (FileType.SYMLINK, "/home/user/links/target.txt"),
    }
    # A listing does not descend through a link to a directory.
    assert [e.name for e in sbx.files.list("links", depth=2)] == [
        "dangling",
        "dir",
        "target.txt",
        "to-dir",
        "to-file",
    ]


def test_list_walk_order(sbx: Any) -> None:
    # E2B lists depth first, each directory's entries by name, each
    # directory followed at once by what is under it ("a/x" before "a-b").
    for d in ("order/a/x", "order/a/y", "order/a-b", "order/b"):
        sbx.files.make_dir(d)
    sbx.files.write("order/0.txt", "0")
    assert [e.path.removeprefix("/home/user/order/") for e in sbx.files.list("order", depth=3)] == [
        "0.txt",
        "a",
        "a/x",
        "a/y",
        "a-b",
        "b",
    ]


def test_watch_dir(sbx: Any) -> None:
    sbx.files.make_dir("watched")
    watcher = sbx.files.watch_dir("watched")
    try:
        sbx.files.write("watched/new.txt", "n")
        events = watcher.get_new_events()
        # One by one, as envd counts an upload's events.
        assert [(e.name, e.type.name) for e in events] == [
            ("new.txt", "CREATE"),
            ("new.txt", "CHMOD"),
            ("new.txt", "WRITE"),
        ]
        sbx.files.remove("watched/new.txt")
        assert [(e.name, e.type.name) for e in watcher.get_new_events()] == [("new.txt", "REMOVE")]
    finally:
        watcher.stop()


def _owner(native: withruntime.Sandbox, path: str) -> str:
    # sudo: the sandbox user may not look into /root.
    return native.exec(["sudo", "-n", "stat", "-c", "%U:%G", path], check=True).stdout.strip()


def test_as_root(sbx: Any, native: withruntime.Sandbox) -> None:
    info = sbx.files.write("root-note.txt", "only root", user="root")
    assert info.path == "/root/root-note.txt"
    assert _owner(native, "/root/root-note.txt") == "root:root"
    assert sbx.files.read("/root/root-note.txt", user="root") == "only root"
    assert sbx.files.exists("root-note.txt", user="root") is True
    got = sbx.files.get_info("/root/root-note.txt", user="root")
    assert (got.owner, got.size) == ("root", 9)
    assert sbx.files.make_dir("/root/made/by/root", user="root") is True
    assert _owner(native, "/root/made/by") == "root:root"
    assert "made" in [e.name for e in sbx.files.list("/root", user="root")]

    # The default user's files are the sandbox user's, in its home.
    sbx.files.write("user-note.txt", "mine")
    assert _owner(native, "/home/user/user-note.txt") == "user:user"

    sbx.files.write("/tmp/root-owned/f.txt", "r", user="root")
    assert _owner(native, "/tmp/root-owned") == "root:root"
    sbx.files.rename("/tmp/root-owned/f.txt", "/tmp/root-owned/g.txt", user="root")
    assert _owner(native, "/tmp/root-owned/g.txt") == "root:root"
    sbx.files.remove("/tmp/root-owned", user="root")
    assert sbx.files.exists("/tmp/root-owned") is False


# envd 0.6.x file metadata: owner, group, permissions, modification time and
# link target as the sandbox has them, and the user-defined metadata an
# upload sets (extended attributes user.e2b.<key>).


def test_stat_metadata(sbx: Any) -> None:
    before = datetime.now(timezone.utc) - timedelta(minutes=5)
    sbx.files.write("meta/a.txt", "12345")
    info = sbx.files.get_info("meta/a.txt")
    assert (info.owner, info.group, info.permissions, info.size) == ("user", "user", "-rw-r--r--", 5)
    assert before < info.modified_time < datetime.now(timezone.utc) + timedelta(minutes=5)
    # What root owns is root's, whoever asks.
    etc = sbx.files.get_info("/etc/passwd")
    assert (etc.owner, etc.group) == ("root", "root")
    # Written as Go's FileMode writes it, as envd does (sticky is a "t" up front).
    assert sbx.files.get_info("/tmp").permissions == "dtrwxrwxrwx"
    # An id without a name is its number.
    sbx.commands.run("sudo -n chown 4242:4343 /home/user/meta/a.txt")
    odd = sbx.files.get_info("meta/a.txt")
    assert (odd.owner, odd.group) == ("4242", "4343")
    sbx.commands.run("ln -sf a.txt /home/user/meta/link")
    link = {e.name: e for e in sbx.files.list("meta")}["link"]
    assert (link.type, link.symlink_target, link.owner) == (FileType.SYMLINK, "/home/user/meta/a.txt", "user")


def test_write_metadata_round_trip(sbx: Any, native: withruntime.Sandbox) -> None:
    md = {"author": "mish", "purpose": "upload"}
    info = sbx.files.write("md/one.txt", "x", metadata=md)
    assert info.metadata == md
    assert sbx.files.get_info("md/one.txt").metadata == md
    octet = sbx.files.write("md/two.txt", "y", metadata={"Stage": "octet"}, use_octet_stream=True)
    assert octet.metadata == {"stage": "octet"}  # keys lowercased, as envd does
    many = sbx.files.write_files(
        [WriteEntry(path="md/m1", data="1"), WriteEntry(path="md/m2", data="2")], metadata={"src": "suite"}
    )
    assert [i.metadata for i in many] == [{"src": "suite"}] * 2
    listed = {e.name: e.metadata for e in sbx.files.list("md")}
    assert listed == {"one.txt": md, "two.txt": {"stage": "octet"}, "m1": {"src": "suite"}, "m2": {"src": "suite"}}
    moved = sbx.files.rename("md/one.txt", "md/moved.txt")
    assert moved.metadata == md
    # A write without metadata leaves the file with none.
    assert sbx.files.write("md/moved.txt", "z").metadata is None
    assert sbx.files.get_info("md/moved.txt").metadata is None
    # Set out of band, in the sandbox: reported too.
    r = sbx.commands.run("python3 -c \"import os; os.setxattr('/home/user/md/m1', 'user.e2b.author', b'shell')\"")
    assert r.exit_code == 0
    assert sbx.files.get_info("md/m1").metadata == {"src": "suite", "author": "shell"}
    # withruntime's own API sees them as user-namespace attributes, and
    # sets them.
    assert native.files.stat("/home/user/md/m1").attrs == {"e2b.src": "suite", "e2b.author": "shell"}
    made = native.files.write("/home/user/md/native.txt", "n", attrs={"e2b.from": "native", "e2b.eq": "a=b"})
    assert made.attrs == {"e2b.from": "native", "e2b.eq": "a=b"}
    assert sbx.files.get_info("md/native.txt").metadata == {"from": "native", "eq": "a=b"}


def test_metadata_bounds(sbx: Any) -> None:
    # Over 4096 bytes in all: refused, and nothing is written.
    with pytest.raises(e2b.InvalidArgumentException):
        sbx.files.write("md/big.txt", "x", metadata={"k": "v" * 5000})
    assert sbx.files.exists("md/big.txt") is False


def test_watch_entry_info(sbx: Any) -> None:
    # envd 0.6.3 and 0.6.4: entry info in events, network mounts allowed
    # (a polled watch sees every filesystem alike).
    sbx.files.make_dir("watched-meta")
    w = sbx.files.watch_dir("watched-meta", include_entry=True, allow_network_mounts=True)
    try:
        sbx.files.write("watched-meta/n.txt", "abc", metadata={"k": "v"})
        events = w.get_new_events()
        assert [e.type.name for e in events] == ["CREATE", "CHMOD", "WRITE"]
        entry = events[-1].entry
        assert entry is not None
        assert (entry.name, entry.path, entry.size) == ("n.txt", "/home/user/watched-meta/n.txt", 3)
        assert entry.owner == "user"
        assert entry.metadata == {"k": "v"}
        sbx.files.write("watched-meta/n.txt", "abcd")
        assert [(e.type.name, e.entry.size) for e in w.get_new_events()] == [("WRITE", 4)]
    finally:
        w.stop()


def test_signed_urls_without_a_token(sbx: Any, native: withruntime.Sandbox) -> None:
    # A pre-signed URL is fetched as a browser would: no header at all,
    # here routed by header (E2B_SANDBOX_URL), so no sandbox id in it.
    import json
    import urllib.error
    import urllib.request

    sbx.files.write("signed.txt", "shared by URL")
    with urllib.request.urlopen(sbx.download_url("signed.txt", "user")) as resp:
        assert resp.status == 200 and resp.read() == b"shared by URL"
    with urllib.request.urlopen(sbx.download_url("signed.txt", "user", 120)) as resp:
        assert resp.read() == b"shared by URL"
    up = urllib.request.Request(sbx.upload_url("by-url.txt", "user"), data=b"uploaded by URL",
                                headers={"Content-Type": "application/octet-stream"}, method="POST")
    with urllib.request.urlopen(up) as resp:
        assert resp.status == 200
    assert native.files.read("/home/user/by-url.txt") == "uploaded by URL"
    for bad in (sbx.download_url("signed.txt", "user", use_signature_expiration=-120),
                sbx.download_url("signed.txt", "user").replace("signature=v1_", "signature=v1_x")):
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(bad)
        assert exc.value.code == 401
        body = json.loads(exc.value.read().decode())
        assert body["code"] == 401 and "shared by URL" not in body["message"]
    expired = sbx.download_url("signed.txt", "user", use_signature_expiration=-120)
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(expired)
    assert json.loads(exc.value.read().decode()) == {"code": 401, "message": "signature is already expired"}


def test_write_makes_folders_only_root_may(sbx: Any, native: withruntime.Sandbox) -> None:
    # As E2B's daemon does, a write as the default user makes the missing
    # folders above the file, even under one only root may write (/), and
    # gives them to the user; an existing folder's owner does not change.
    info = sbx.files.write("/0/e2b-top/f.txt", "top")
    assert info.path == "/0/e2b-top/f.txt"
    assert sbx.files.read("/0/e2b-top/f.txt") == "top"
    owners = native.exec(["stat", "-c", "%U %n", "/0", "/0/e2b-top", "/0/e2b-top/f.txt", "/"]).stdout.split("\n")
    assert owners[:4] == ["user /0", "user /0/e2b-top", "user /0/e2b-top/f.txt", "root /"]
