"""Snapshots and forks: sbx.snapshot() (no template name), sbx.fork(n),
Sandbox.create(snapshot=...), Snapshot.list/get/delete.

The unit tests check request shapes and the result types against a canned
server; the tests marked live snapshot and fork a real sandbox whose
Python kernel holds a variable.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from cannedserver import CannedServer, canned  # noqa: F401 - the fixture
from conftest import SMALL

import withruntime
from withruntime import APIError, Forks, Sandbox, Snapshot, TemplateInfo

NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-09T03:04:05Z"


def snap(id: str = "snap_00aa", **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": id, "name": "", "sandbox_id": "sbx_a", "isolation": "gvisor", "template": "default",
                         "vcpus": 1, "memory_mib": 1024, "size_bytes": 4096, "created_at": NOW,
                         "expires_at": LATER, "freeze_ms": 12}
    d.update(kw)
    return d


@pytest.fixture
def served(canned: CannedServer, monkeypatch: pytest.MonkeyPatch) -> CannedServer:
    """The canned server, as the SDK's default server and key."""
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", canned.base_url)
    monkeypatch.setenv("WITHRUNTIME_API_KEY", "test-key")
    return canned


def test_snapshot_fork_and_create_from_one(served: CannedServer) -> None:
    served.answer("POST", "/v1/sandboxes/sbx_a/snapshots", 201, snap(name="before", newer="kept in raw"))
    served.answer("POST", "/v1/sandboxes/sbx_a/fork", 201,
                  {"sandboxes": [{"id": "sbx_b", "state": "running"}, {"id": "sbx_c", "state": "running"}]})
    served.answer("POST", "/v1/sandboxes", 201, {"id": "sbx_d", "state": "running"})
    served.answer("GET", "/v1/snapshots", 200, {"snapshots": [snap("snap_00bb"), snap()]})
    served.answer("GET", "/v1/snapshots/snap_00aa", 200, snap())
    served.answer("DELETE", "/v1/snapshots/snap_00aa", 204, None)
    sbx = Sandbox("sbx_a")

    got = sbx.snapshot(name="before")
    assert isinstance(got, Snapshot), f"got {got!r}"
    assert (got.id, got.name, got.sandbox_id, got.size_bytes, got.freeze_ms, got.raw["newer"]) == \
        ("snap_00aa", "before", "sbx_a", 4096, 12, "kept in raw"), f"got {got}"
    assert got.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc) and got.expires_at is not None
    forks = sbx.fork(2)
    assert isinstance(forks, Forks) and [f.id for f in forks] == ["sbx_b", "sbx_c"] and forks.snapshot is None
    assert all(isinstance(f, Sandbox) for f in forks)
    assert Sandbox.create(snapshot="snap_00aa").id == "sbx_d"
    assert [s.id for s in Snapshot.list()] == ["snap_00bb", "snap_00aa"]
    one = Snapshot.get("snap_00aa")
    one.delete()

    sent = [(s.method, s.path, s.json() if s.body else None) for s in served.sent]
    assert sent == [
        ("POST", "/v1/sandboxes/sbx_a/snapshots", {"name": "before"}),
        ("POST", "/v1/sandboxes/sbx_a/fork", {"count": 2}),
        ("POST", "/v1/sandboxes", {"snapshot": "snap_00aa"}),
        ("GET", "/v1/snapshots", None),
        ("GET", "/v1/snapshots/snap_00aa", None),
        ("DELETE", "/v1/snapshots/snap_00aa", None),
    ], f"got {sent}"


def test_fork_keeps_its_snapshot(served: CannedServer) -> None:
    served.answer("POST", "/v1/sandboxes/sbx_a/fork", 201,
                  {"sandboxes": [{"id": "sbx_b", "state": "running"}], "snapshot": snap()})
    forks = Sandbox("sbx_a").fork(keep_snapshot=True)
    assert [f.id for f in forks] == ["sbx_b"] and forks.snapshot is not None and forks.snapshot.id == "snap_00aa"
    assert served.sent[0].json() == {"count": 1, "keep_snapshot": True}


def test_a_template_name_still_makes_a_template(served: CannedServer) -> None:
    served.answer("POST", "/v1/sandboxes/sbx_a/snapshot", 201,
                  {"id": "tpl_a", "name": "app", "tag": "latest", "source": "snapshot", "created_at": NOW})
    got = Sandbox("sbx_a").snapshot("app")
    assert isinstance(got, TemplateInfo) and got.ref == "app:latest", f"got {got!r}"
    assert served.sent[0].path == "/v1/sandboxes/sbx_a/snapshot" and served.sent[0].json() == {"template": "app"}
    with pytest.raises(ValueError):
        Sandbox("sbx_a").snapshot("app", name="label")


@pytest.mark.parametrize("n", [0, -1, True, 1.5])
def test_fork_counts_refused_before_sending(served: CannedServer, n: Any) -> None:
    with pytest.raises(APIError) as e:
        Sandbox("sbx_a").fork(n)
    assert e.value.code == "invalid_request"
    assert served.sent == []


def test_refusals_are_api_errors(served: CannedServer) -> None:
    served.error("POST", "/v1/sandboxes/sbx_a/fork", 429, "concurrency_limit_reached", "past 2")
    served.error("GET", "/v1/snapshots/snap_x", 404, "not_found", "no snapshot snap_x")
    with pytest.raises(APIError) as e:
        Sandbox("sbx_a").fork(3)
    assert e.value.code == "concurrency_limit_reached"
    with pytest.raises(APIError) as e:
        Snapshot.get("snap_x")
    assert e.value.code == "not_found"
    assert "Snapshot" in withruntime.__all__ and withruntime.Snapshot is Snapshot


@pytest.mark.live
def test_snapshot_fork_live(live_server: dict[str, str]) -> None:
    with Sandbox.create(timeout_seconds=600, metadata={"test": "sdk-python"}, **SMALL, **live_server) as sbx:
        assert sbx.run_code("x = 40\nx").text == "40"
        made = sbx.snapshot(name="sdk-python")
        assert made.id.startswith("snap_") and made.sandbox_id == sbx.id and made.name == "sdk-python"
        assert made.size_bytes > 0 and made.expires_at and made.created_at and made.expires_at > made.created_at
        assert made.id in [s.id for s in Snapshot.list(**live_server)]
        assert Snapshot.get(made.id, **live_server).size_bytes == made.size_bytes

        forks = sbx.fork(2)
        try:
            assert len(forks) == 2 and forks.snapshot is None and len({f.id for f in forks} | {sbx.id}) == 3
            boots = {sbx.exec("cat /proc/sys/kernel/random/boot_id", check=True).stdout}
            for f in forks:
                assert f.run_code("x + 2").text == "42"
                f.files.write("own.txt", f.id)
                boots.add(f.exec("cat /proc/sys/kernel/random/boot_id", check=True).stdout)
            assert len(boots) == 3, f"boot ids {boots}"
            assert [f.files.read("own.txt") for f in forks] == [f.id for f in forks]
            assert not sbx.files.exists("own.txt")
            assert sbx.run_code("x + 1").text == "41"
        finally:
            for f in forks:
                f.stop()

        with Sandbox.create(snapshot=made.id, timeout_seconds=120, **live_server) as again:
            assert again.run_code("x").text == "40"
            assert again.info().memory_mib == SMALL["memory_mib"]
    made.delete()
    with pytest.raises(APIError) as e:
        Snapshot.get(made.id, **live_server)
    assert e.value.code == "not_found"
