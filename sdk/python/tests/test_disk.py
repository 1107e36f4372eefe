"""disk_gib: the root disk's size, a create option the server bounds."""

from __future__ import annotations

import json

import pytest
from conftest import SMALL

from withruntime import APIError, Sandbox, SandboxInfo


def test_create_sends_disk_gib(fake) -> None:
    Sandbox.create(disk_gib=2)
    creates = [r for r in fake.state.requests if r.method == "POST" and r.path == "/v1/sandboxes"]
    assert json.loads(creates[0].body) == {"disk_gib": 2}


def test_info_reads_disk_gib() -> None:
    assert SandboxInfo.from_json({"id": "sbx1", "state": "running", "disk_gib": 7}).disk_gib == 7


@pytest.mark.live
@pytest.mark.usefixtures("live_server")
def test_live_disk_gib() -> None:
    with Sandbox.create(disk_gib=2, **SMALL) as sbx:
        assert sbx.info().disk_gib == 2
        mib = int(sbx.exec("df -B1M --output=size / | tail -1", check=True).stdout)
        assert 1900 <= mib <= 2100, mib
    for bad in (0, -1, 101):
        with pytest.raises(APIError) as e:
            Sandbox.create(disk_gib=bad, **SMALL).stop()
        assert (e.value.code, e.value.status) == ("invalid_request", 400), bad
