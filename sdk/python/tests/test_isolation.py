"""isolation: the sandbox's boundary, a create option and a field of its info."""

from __future__ import annotations

import json

from withruntime import Sandbox, SandboxInfo


def test_create_sends_isolation(fake) -> None:
    Sandbox.create(isolation="microvm")
    Sandbox.create()
    creates = [r for r in fake.state.requests if r.method == "POST" and r.path == "/v1/sandboxes"]
    assert json.loads(creates[0].body) == {"isolation": "microvm"}
    assert "isolation" not in json.loads(creates[1].body)


def test_info_reads_isolation() -> None:
    for name in ("gvisor", "microvm"):
        assert SandboxInfo.from_json({"id": "sbx1", "state": "running", "isolation": name}).isolation == name
