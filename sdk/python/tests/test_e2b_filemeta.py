"""envd 0.6.x file metadata through the unmodified e2b SDK: owner, group,
permissions, modification time and link target as the sandbox has them,
and the user-defined metadata an upload sets (extended attributes
user.e2b.<key>), read back by get_info, list, rename and withruntime's
own SDK, over a real sandbox."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

from e2b import FileType  # noqa: E402
from e2b.sandbox.filesystem.filesystem import WriteEntry  # noqa: E402


@pytest.fixture(scope="module")
def sbx(e2b_env: Any, live_server: dict[str, str]) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        for k, v in dict(e2b_env).items():
            mp.setenv(k, v)
        s = e2b.Sandbox.create(timeout=600, metadata={"test": "e2b-filemeta"})
        try:
            yield s
        finally:
            s.kill()


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


def test_write_metadata_round_trip(sbx: Any, live_server: dict[str, str]) -> None:
    import withruntime

    md = {"author": "mish", "purpose": "upload"}
    info = sbx.files.write("md/one.txt", "x", metadata=md)
    assert info.metadata == md
    assert sbx.files.get_info("md/one.txt").metadata == md
    octet = sbx.files.write("md/two.txt", "y", metadata={"Stage": "octet"}, use_octet_stream=True)
    assert octet.metadata == {"stage": "octet"}  # keys lowercased, as envd does
    many = sbx.files.write_files([WriteEntry(path="md/m1", data="1"), WriteEntry(path="md/m2", data="2")], metadata={"src": "suite"})
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
    # withruntime's own API sees them as user-namespace attributes.
    native = withruntime.Sandbox.connect(sbx.sandbox_id, **live_server)
    assert native.files.stat("/home/user/md/m1").attrs == {"e2b.src": "suite", "e2b.author": "shell"}


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
        assert (entry.name, entry.path, entry.size, entry.owner) == ("n.txt", "/home/user/watched-meta/n.txt", 3, "user")
        assert entry.metadata == {"k": "v"}
        sbx.files.write("watched-meta/n.txt", "abcd")
        assert [(e.type.name, e.entry.size) for e in w.get_new_events()] == [("WRITE", 4)]
    finally:
        w.stop()
