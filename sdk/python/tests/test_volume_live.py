"""Volumes against a real withruntime server (marked `live`): a volume
outlives the sandbox that wrote it, a read-only mount refuses writes, and
the files API reads and writes it without a sandbox."""

from __future__ import annotations

import uuid

import pytest
from conftest import SMALL

from withruntime import APIError, Sandbox, Volume

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]


def test_volume_round_trip() -> None:
    name = "py-" + uuid.uuid4().hex[:8]
    vol = Volume.create(name, size_gib=1)
    try:
        assert vol.name == name and vol.size_gib == 1 and vol.mounted_by == []
        assert name in [v.name for v in Volume.list()]
        vol.write_file("/from-api.txt", "api")
        with Sandbox.create(volumes=[{"name": name, "path": "/data"}], **SMALL) as sbx:
            assert sbx.exec("cat /data/from-api.txt").stdout == "api"
            sbx.exec("echo written > /data/from-sandbox.txt", check=True)
            assert Volume.get(name).mounted_by == [sbx.id]
            with pytest.raises(APIError) as e:
                vol.delete()
            assert e.value.code == "conflict"
        with Sandbox.create(volumes=[{"name": name, "path": "/ro", "read_only": True}], **SMALL) as sbx:
            assert sbx.exec("cat /ro/from-sandbox.txt").stdout == "written\n"
            assert sbx.exec("touch /ro/x").exit_code != 0
        assert vol.read_file("/from-sandbox.txt") == b"written\n"
        assert {e.name for e in vol.list_files("/")} == {"from-api.txt", "from-sandbox.txt"}
        with pytest.raises(APIError) as e:
            Sandbox.create(volumes=[{"name": name, "path": "/proc"}], **SMALL)
        assert e.value.code == "invalid_request"
    finally:
        vol.delete()
    with pytest.raises(APIError) as e:
        Volume.get(name)
    assert e.value.code == "not_found"
