"""The files API acts as the user it names, and the sandbox's kernel
checks that user's permissions (marked `live`): `sbx.files` as the default
user may not read /etc/shadow nor write /etc, by any call, and raises
APIError `forbidden`; with user="root" it may. E2B's unmodified client,
whose default user is "user" too, gets the same answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from withruntime import APIError, Sandbox

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]


def _forbidden(call: Any, *args: Any, **kwargs: Any) -> APIError:
    with pytest.raises(APIError) as ei:
        call(*args, **kwargs)
    assert (ei.value.code, ei.value.status) == ("forbidden", 403), ei.value
    return ei.value


def _owner(sbx: Sandbox, path: str) -> str:
    return sbx.exec(["sudo", "-n", "stat", "-c", "%U:%G", path], check=True).stdout.strip()


def test_user_is_refused_what_the_kernel_refuses(live_sbx: Sandbox, tmp_path: Path) -> None:
    sbx = live_sbx
    # The same command, as the same user, is refused by the kernel too.
    assert sbx.exec("cat /etc/shadow").exit_code != 0

    e = _forbidden(sbx.files.read, "/etc/shadow")
    assert "/etc/shadow" in e.message and "root" in e.message
    _forbidden(sbx.files.read_bytes, "/etc/shadow", user="user")
    _forbidden(sbx.files.write, "/etc/withruntime-user.txt", "x")
    _forbidden(sbx.files.mkdir, "/etc/withruntime-dir")
    _forbidden(sbx.files.remove, "/etc/hostname")
    _forbidden(sbx.files.download, "/etc/shadow", tmp_path / "shadow")
    assert not (tmp_path / "shadow").exists()
    local = tmp_path / "f.txt"
    local.write_text("from the host")
    _forbidden(sbx.files.upload, local, "/etc/f.txt")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "g.txt").write_text("g")
    _forbidden(sbx.files.upload, tree, "/etc/withruntime-tree")
    assert sbx.exec("ls /etc/withruntime-user.txt /etc/f.txt /etc/withruntime-tree /etc/withruntime-dir").exit_code != 0
    assert sbx.files.exists("/etc/hostname")

    # What the user may do it still does, and what it makes is its own.
    sbx.files.write("/workspace/mine.txt", "mine")
    assert sbx.files.read("mine.txt") == "mine"
    sbx.files.upload(tree, "/home/user/tree")
    assert _owner(sbx, "/home/user/tree/sub/g.txt") == "user:user"
    assert sbx.files.read("/etc/hostname")  # world-readable


def test_root_when_asked(live_sbx: Sandbox, tmp_path: Path) -> None:
    sbx = live_sbx
    assert sbx.files.read("/etc/shadow", user="root").startswith("root:")
    info = sbx.files.write("/etc/withruntime-root.txt", "by root", user="root")
    assert info.path == "/etc/withruntime-root.txt"
    assert _owner(sbx, "/etc/withruntime-root.txt") == "root:root"
    assert sbx.files.read("/etc/withruntime-root.txt") == "by root"  # 0644: the user reads it
    # The user may not overwrite root's file.
    _forbidden(sbx.files.write, "/etc/withruntime-root.txt", "by user")
    local = tmp_path / "f.txt"
    local.write_text("uploaded by root")
    sbx.files.upload(local, "/etc/withruntime-up.txt", user="root")
    assert _owner(sbx, "/etc/withruntime-up.txt") == "root:root"
    got = sbx.files.download("/etc/shadow", tmp_path / "shadow", user="root")
    assert got.files == 1 and (tmp_path / "shadow").read_text().startswith("root:")
    assert "withruntime-root.txt" in [f.name for f in sbx.files.list("/etc", user="root")]
    sbx.files.mkdir("/root/made", user="root")
    assert sbx.files.stat("/root/made", user="root").is_dir
    _forbidden(sbx.files.stat, "/root/made")  # /root is 0700
    sbx.files.remove("/etc/withruntime-root.txt", user="root")
    assert not sbx.files.exists("/etc/withruntime-root.txt")


def test_e2b_files_act_as_user(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    e2b = pytest.importorskip("e2b")
    sbx = e2b.Sandbox.create(timeout=300, metadata={"test": "files-user"})
    try:
        with pytest.raises(e2b.SandboxException, match="403"):
            sbx.files.write("/etc/e2b.txt", "x")
        with pytest.raises(e2b.SandboxException, match="403"):
            sbx.files.read("/etc/shadow")
        assert sbx.files.read("/etc/shadow", user="root").startswith("root:")
        sbx.files.write("/etc/e2b.txt", "x", user="root")
        native = Sandbox.connect(sbx.sandbox_id, **live_server)
        assert _owner(native, "/etc/e2b.txt") == "root:root"
        assert os.path.basename(sbx.files.write("note.txt", "n").path) == "note.txt"
        assert _owner(native, "/home/user/note.txt") == "user:user"
    finally:
        sbx.kill()
