"""E2B's volumes, driven by E2B's own Python client (e2b 2.63.0,
unmodified) against the live server's --e2b-listen address: Volume.create,
list, get_info, destroy and the volume content API (write_file, read_file,
list, get_info, make_dir, remove) map onto withruntime's named volumes, a
sandbox created with volume_mounts sees the volume's files, another
account's volume id is not found, and a mounted volume is not destroyed."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402
from withruntime.admin import Client  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def volume_env(e2b_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """E2B's content API is this listener too (E2B_VOLUME_API_URL)."""
    monkeypatch.setenv("E2B_VOLUME_API_URL", e2b_env["E2B_API_URL"])
    return e2b_env


@pytest.fixture
def volume(volume_env: dict[str, str]) -> Iterator[Any]:
    vol = e2b.Volume.create("e2b-" + uuid.uuid4().hex[:8])
    try:
        yield vol
    finally:
        e2b.Volume.destroy(vol.volume_id)


def test_volume_control_plane(volume_env: dict[str, str], live_server: dict[str, str]) -> None:
    name = "e2b-" + uuid.uuid4().hex[:8]
    vol = e2b.Volume.create(name)
    try:
        assert vol.name == name and vol.volume_id and vol.token
        assert live_server["api_key"] not in vol.token
        # It is a withruntime volume of the key's account, by that name.
        ours = withruntime.Volume.get(name, **live_server)
        assert ours.name == name and ours.size_gib == 1
        assert (vol.volume_id, name) in [(v.volume_id, v.name) for v in e2b.Volume.list()]
        info = e2b.Volume.get_info(vol.volume_id)
        assert info.name == name and info.token == vol.token
        with pytest.raises(e2b.VolumeException, match="409"):
            e2b.Volume.create(name)
    finally:
        assert e2b.Volume.destroy(vol.volume_id) is True
    assert e2b.Volume.destroy(vol.volume_id) is False
    with pytest.raises(e2b.exceptions.VolumeNotFoundException):
        e2b.Volume.get_info(vol.volume_id)
    assert name not in [v.name for v in withruntime.Volume.list(**live_server)]


def test_volume_content(volume: Any) -> None:
    st = volume.write_file("/docs/hello.txt", "hello from e2b")
    assert st.type.value == "file" and st.path == "/docs/hello.txt" and st.size == 14
    assert volume.read_file("/docs/hello.txt") == "hello from e2b"
    assert b"".join(volume.read_file("/docs/hello.txt", format="stream")) == b"hello from e2b"
    volume.write_file("/docs/hello.txt", b"\x00\x01binary", force=True)
    assert volume.read_file("/docs/hello.txt", format="bytes") == b"\x00\x01binary"
    with pytest.raises(e2b.VolumeException, match="409"):
        volume.write_file("/docs/hello.txt", "no", force=False)

    info = volume.get_info("/docs")
    assert info.type.value == "directory" and info.name == "docs" and info.path == "/docs"
    assert volume.exists("/docs/hello.txt") and not volume.exists("/docs/nope.txt")
    with pytest.raises(e2b.exceptions.VolumePathNotFoundException):
        volume.read_file("/docs/nope.txt")

    volume.make_dir("/a/b/c", force=True)
    with pytest.raises(e2b.VolumeException, match="409"):
        volume.make_dir("/a/b/c")
    with pytest.raises(e2b.exceptions.VolumePathNotFoundException):
        volume.make_dir("/x/y")
    volume.write_file("/a/b/c/deep.txt", "deep")
    assert sorted(e.path for e in volume.list("/")) == ["/a", "/docs"]
    assert sorted(e.path for e in volume.list("/", depth=4)) == [
        "/a", "/a/b", "/a/b/c", "/a/b/c/deep.txt", "/docs", "/docs/hello.txt"]

    # What withruntime cannot do is named, not ignored.
    with pytest.raises(e2b.VolumeException, match="owner or mode"):
        volume.write_file("/m.txt", "m", mode=0o600)
    assert not volume.exists("/m.txt")
    with pytest.raises(e2b.VolumeException, match="owner or mode"):
        volume.update_metadata("/docs/hello.txt", mode=0o600)

    volume.remove("/a")
    assert not volume.exists("/a/b/c/deep.txt") and not volume.exists("/a")
    with pytest.raises(e2b.exceptions.VolumePathNotFoundException):
        volume.remove("/a")


def test_volume_mounted_in_a_sandbox(volume: Any) -> None:
    volume.write_file("/from-api.txt", "written outside")
    sbx = e2b.Sandbox.create(timeout=120, volume_mounts={"/mnt/data": volume})
    try:
        assert sbx.commands.run("cat /mnt/data/from-api.txt").stdout == "written outside"
        sbx.commands.run("echo written inside > /mnt/data/from-sandbox.txt")
        assert volume.read_file("/from-sandbox.txt") == "written inside\n"
        mounts = sbx.get_info().volume_mounts
        assert [(m["name"], m["path"]) for m in mounts] == [(volume.name, "/mnt/data")], mounts
        # A mounted volume is not destroyed.
        with pytest.raises(e2b.VolumeException, match="409"):
            e2b.Volume.destroy(volume.volume_id)
        assert e2b.Volume.get_info(volume.volume_id).name == volume.name
    finally:
        sbx.kill()


def test_another_accounts_volume_is_not_found(volume: Any, live_server: dict[str, str]) -> None:
    admin = Client(**live_server)
    account = "e2b-vol-" + uuid.uuid4().hex[:8]
    admin.accounts.create(account)
    key = admin.keys.create(account=account, format="e2b")
    try:
        other = {"api_key": key.secret}
        with pytest.raises(e2b.exceptions.VolumeNotFoundException):
            e2b.Volume.get_info(volume.volume_id, **other)
        assert e2b.Volume.destroy(volume.volume_id, **other) is False
        assert volume.volume_id not in [v.volume_id for v in e2b.Volume.list(**other)]
        with pytest.raises(e2b.SandboxException, match="404"):
            e2b.Sandbox.create(timeout=60, volume_mounts={"/mnt/data": volume.name}, **other)
        # Its own volume's token does not open ours.
        mine = e2b.Volume.create("e2b-" + uuid.uuid4().hex[:8], **other)
        try:
            forged = e2b.Volume(volume_id=volume.volume_id, name=volume.name, token=mine.token)
            with pytest.raises(e2b.exceptions.AuthenticationException):
                forged.read_file("/anything")
        finally:
            e2b.Volume.destroy(mine.volume_id, **other)
    finally:
        admin.keys.remove(key.id)
    assert e2b.Volume.get_info(volume.volume_id).name == volume.name
