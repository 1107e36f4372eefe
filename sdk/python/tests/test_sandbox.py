"""Sandbox lifecycle, configuration and error mapping, against the fake server."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timezone

import pytest

import withruntime
from withruntime import APIError, Error, Sandbox, SandboxInfo, TransportError


def test_create_sends_only_given_options(fake) -> None:
    Sandbox.create()
    Sandbox.create(
        vcpus=1,
        memory_mib=1024,
        timeout_seconds=1800,
        on_lease_end="pause",
        env={"A": "1"},
        metadata={"k": "v"},
        image="default",
        network={"internet": True, "allow": ["api.openai.com"]},
        max_cost_micros=50_000,
    )
    creates = [r for r in fake.state.requests if r.method == "POST" and r.path == "/v1/sandboxes"]
    assert json.loads(creates[0].body) == {}
    assert json.loads(creates[1].body) == {
        "vcpus": 1,
        "memory_mib": 1024,
        "timeout_seconds": 1800,
        "on_lease_end": "pause",
        "env": {"A": "1"},
        "metadata": {"k": "v"},
        "image": "default",
        "network": {"internet": True, "allow": ["api.openai.com"]},
        "max_cost_micros": 50_000,
    }
    assert creates[1].headers["authorization"] == "Bearer test-key"
    assert creates[1].headers["content-type"] == "application/json"


def test_arguments_override_environment(fake, monkeypatch) -> None:
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", "http://127.0.0.1:9")  # nothing there
    monkeypatch.setenv("WITHRUNTIME_API_KEY", "wrong")
    sbx = Sandbox.create(base_url=fake.base_url + "/", api_key="test-key")
    assert sbx.info().state == "running"


def test_info_fields(sbx: Sandbox) -> None:
    info = sbx.info()
    assert info.id == sbx.id
    assert info.state == "running"
    assert info.vcpus == 2 and info.memory_mib == 4096
    assert info.lease_ends_at == datetime(2026, 1, 2, 3, 9, 5, tzinfo=timezone.utc)
    # Go writes nanoseconds; they are cut to microseconds.
    assert info.created_at == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert info.end_reason is None and info.ended_at is None
    assert info.cost_micros == 1234
    assert info.usage == {"seconds": 90.0, "cpu_seconds": 12.5, "memory_gib_seconds": 360.0}
    assert info.raw["id"] == sbx.id


def test_info_without_cost() -> None:
    # A server older than billing sends neither field.
    info = SandboxInfo.from_json({"id": "sbx-1", "state": "running"})
    assert info.cost_micros == 0 and isinstance(info.cost_micros, int)
    assert info.usage == {}
    info = SandboxInfo.from_json({"id": "sbx-1", "state": "running", "cost_micros": None, "usage": None})
    assert (info.cost_micros, info.usage) == (0, {})


def test_info_node() -> None:
    # A many-host installation names the node; a single box sends none.
    assert SandboxInfo.from_json({"id": "sbx-1", "state": "running", "node": "node1a2b3c4d"}).node == "node1a2b3c4d"
    assert SandboxInfo.from_json({"id": "sbx-1", "state": "running"}).node is None
    ended = SandboxInfo.from_json({"id": "sbx-1", "state": "ended", "end_reason": "node_lost", "node": "n1"})
    assert (ended.end_reason, ended.node) == ("node_lost", "n1")


def test_lifecycle(sbx: Sandbox) -> None:
    assert sbx.pause().state == "paused"
    assert sbx.resume().state == "running"
    assert sbx.extend(3600).lease_ends_at == datetime(2026, 1, 2, 4, 0, tzinfo=timezone.utc)
    info = sbx.stop()
    assert (info.state, info.end_reason) == ("ended", "stopped")
    assert info.cost_micros == 2345  # the final cost


def test_connect_and_list(fake, sbx: Sandbox) -> None:
    again = Sandbox.connect(sbx.id)
    assert again.id == sbx.id
    assert [s.id for s in Sandbox.list()] == [sbx.id]
    with pytest.raises(APIError) as e:
        Sandbox.connect("sbx-missing")
    assert (e.value.code, e.value.status) == ("not_found", 404)


def test_context_manager_stops(fake) -> None:
    with Sandbox.create() as sbx:
        sbx.exec("echo hi")
    assert fake.state.sandboxes[sbx.id]["state"] == "ended"


def test_context_manager_stops_on_error(fake) -> None:
    with pytest.raises(ZeroDivisionError):
        with Sandbox.create() as sbx:
            1 / 0
    assert fake.state.sandboxes[sbx.id]["end_reason"] == "stopped"


def test_stop_failure_does_not_mask_the_error(fake) -> None:
    fake.state.fail_with("POST", "stop", 500, "internal", "stop broke")
    with pytest.raises(KeyError) as e:
        with Sandbox.create():
            raise KeyError("the real error")
    notes = getattr(e.value, "__notes__", [])
    assert any("stop broke" in n for n in notes) or not hasattr(e.value, "add_note")


def test_stop_failure_raises_when_block_succeeded(fake) -> None:
    fake.state.fail_with("POST", "stop", 500, "internal", "stop broke")
    with pytest.raises(APIError, match="stop broke"):
        with Sandbox.create():
            pass


def test_stop_of_an_ended_sandbox_is_quiet(fake) -> None:
    fake.state.fail_with("POST", "stop", 409, "lease_ended", "the lease ended")
    with Sandbox.create():
        pass


def test_explicit_stop_in_block_is_not_repeated(fake) -> None:
    with Sandbox.create() as sbx:
        sbx.stop()
    stops = [r for r in fake.state.requests if r.path.endswith("/stop")]
    assert len(stops) == 1


@pytest.mark.parametrize(
    "status,code",
    [
        (400, "invalid_request"),
        (401, "unauthorized"),
        (402, "max_cost_exceeded"),
        (402, "spending_limit_reached"),
        (403, "forbidden"),
        (409, "conflict"),
        (409, "lease_ended"),
        (413, "payload_too_large"),
        (422, "not_supported"),
        (429, "concurrency_limit_reached"),
        (503, "capacity_exhausted"),
        (500, "internal"),
    ],
)
def test_error_codes_map_to_api_error(fake, status: int, code: str) -> None:
    fake.state.fail_with("POST", "create", status, code, f"refused with {code}")
    with pytest.raises(APIError) as e:
        Sandbox.create()
    assert (e.value.code, e.value.status, e.value.message) == (code, status, f"refused with {code}")
    assert isinstance(e.value, Error)
    assert code in str(e.value) and str(status) in str(e.value)


def test_error_without_json_body(fake) -> None:
    fake.state.fail[("POST", "create")] = (502, b"<html>bad gateway</html>", "text/html")
    with pytest.raises(APIError) as e:
        Sandbox.create()
    assert (e.value.code, e.value.status) == ("internal", 502)
    assert "bad gateway" in e.value.message


def test_wrong_key_is_unauthorized(fake) -> None:
    with pytest.raises(APIError) as e:
        Sandbox.create(api_key="nope")
    assert (e.value.code, e.value.status) == ("unauthorized", 401)


def test_unreachable_server_is_transport_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(TransportError) as e:
        Sandbox.create(base_url=f"http://127.0.0.1:{port}", api_key="k")
    assert "refused" in str(e.value)
    assert isinstance(e.value, Error)


def test_bad_base_url() -> None:
    with pytest.raises(ValueError):
        Sandbox.create(base_url="ftp://example.invalid")


def test_keep_alive_and_threads(fake, sbx: Sandbox) -> None:
    import threading

    fake.state.client_ports.clear()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                assert sbx.info().state == "running"
                assert sbx.exec("echo x").stdout == "x\n"
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # One keep-alive connection per thread, not one per request.
    assert len(fake.state.client_ports) <= 6


def test_stale_keep_alive_connection_is_replaced(fake, sbx: Sandbox) -> None:
    sbx.info()
    before = set(fake.state.client_ports)
    # The server closes its idle connections, as an idle timeout would.
    fake.drop_connections()
    assert sbx.info().state == "running"
    assert fake.state.client_ports - before, "a new connection was made"


def test_public_names() -> None:
    for name in ["Sandbox", "Error", "APIError", "CommandError", "TransportError", "ExecResult", "Process"]:
        assert hasattr(withruntime, name)
    assert issubclass(withruntime.APIError, withruntime.Error)
    assert issubclass(withruntime.CommandError, withruntime.Error)
    assert issubclass(withruntime.TransportError, withruntime.Error)
