"""A sandbox's egress policy and egress log: sbx.network(),
sbx.set_network(), sbx.egress().

The unit tests check request shapes and error mapping against a canned
server; the tests marked live run the same calls on a real sandbox.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from cannedserver import CannedServer, canned  # noqa: F401 - a fixture
from conftest import wait_until

import withruntime
from withruntime import APIError, EgressEvent, Network, Sandbox

SID = "sbx-1"
BASE = f"/v1/sandboxes/{SID}"


@pytest.fixture
def box(canned: CannedServer) -> Sandbox:
    return Sandbox(SID, api_key="test-key", base_url=canned.base_url)


def _sandbox(network: dict[str, object]) -> dict[str, object]:
    return {"id": SID, "state": "running", "network": network, "lease_ends_at": "2026-01-02T03:09:05Z"}


def test_network_get(canned: CannedServer, box: Sandbox) -> None:
    canned.answer("GET", BASE + "/network", 200, {"internet": True, "allow": ["api.openai.com", "*.example.org"]})
    got = box.network()
    want = Network(internet=True, allow=["api.openai.com", "*.example.org"])
    assert got == want, f"got {got}, want {want}"
    canned.answer("GET", BASE + "/network", 200, {"internet": False})
    assert box.network() == Network(internet=False, allow=[])
    assert canned.sent[0].headers["authorization"] == "Bearer test-key"


def test_set_network_sends_the_policy_and_returns_the_sandbox(canned: CannedServer, box: Sandbox) -> None:
    canned.answer("PUT", BASE + "/network", 200, _sandbox({"internet": True, "allow": ["pypi.example"]}))
    info = box.set_network(internet=True, allow=["pypi.example"])
    assert isinstance(info, withruntime.SandboxInfo)
    assert info.network == {"internet": True, "allow": ["pypi.example"]}, f"got {info.network}"
    box.set_network(internet=True)
    box.set_network(internet=False)
    got = [(s.method, s.path, s.json()) for s in canned.sent]
    want = [
        ("PUT", BASE + "/network", {"internet": True, "allow": ["pypi.example"]}),
        ("PUT", BASE + "/network", {"internet": True}),
        ("PUT", BASE + "/network", {"internet": False}),
    ]
    assert got == want, f"got {got}, want {want}"


def test_set_network_refuses_a_str_allow_list(canned: CannedServer, box: Sandbox) -> None:
    with pytest.raises(TypeError):
        box.set_network(internet=True, allow="api.openai.com")  # type: ignore[arg-type]
    assert canned.sent == []


def test_egress_events(canned: CannedServer, box: Sandbox) -> None:
    canned.answer("GET", BASE + "/egress", 200, {"events": [
        {"time": "2026-01-02T03:04:05.5Z", "kind": "dns", "name": "evil.example", "verdict": "refused",
         "reason": "not in the allow list"},
        {"time": "2026-01-02T03:04:06Z", "kind": "tls", "name": "api.openai.com", "address": "203.0.113.7",
         "port": 443, "verdict": "allowed"},
    ]})
    got = box.egress()
    want = [
        EgressEvent(datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc), "dns", "refused",
                    name="evil.example", reason="not in the allow list"),
        EgressEvent(datetime(2026, 1, 2, 3, 4, 6, tzinfo=timezone.utc), "tls", "allowed",
                    name="api.openai.com", address="203.0.113.7", port=443),
    ]
    assert got == want, f"got {got}, want {want}"
    canned.answer("GET", BASE + "/egress", 200, {"events": []})
    assert box.egress() == []


@pytest.mark.parametrize("method, route, status, code, call", [
    ("GET", "/network", 404, "not_found", lambda b: b.network()),
    ("PUT", "/network", 400, "invalid_request", lambda b: b.set_network(internet=False, allow=["x.example"])),
    ("PUT", "/network", 409, "conflict", lambda b: b.set_network(internet=True)),
    ("PUT", "/network", 403, "forbidden", lambda b: b.set_network(internet=True)),
    ("PUT", "/network", 422, "not_supported", lambda b: b.set_network(internet=True)),
    ("GET", "/egress", 404, "not_found", lambda b: b.egress()),
])
def test_errors_carry_the_servers_code(canned: CannedServer, box: Sandbox, method: str, route: str,
                                       status: int, code: str, call: object) -> None:
    canned.error(method, BASE + route, status, code, "refused for the test")
    with pytest.raises(APIError) as ei:
        call(box)  # type: ignore[operator]
    assert (ei.value.code, ei.value.status) == (code, status), f"got {ei.value!r}"


# -- live ---------------------------------------------------------------------


@pytest.mark.live
def test_live_network_get_set_and_egress(live_sbx: Sandbox) -> None:
    assert live_sbx.network() == Network(internet=False, allow=[])

    info = live_sbx.set_network(internet=True, allow=["allowed.invalid", "*.example.org"])
    want = Network(internet=True, allow=["allowed.invalid", "*.example.org"])
    assert Network.from_json(info.network) == want, f"set_network returned {info.network}"
    assert live_sbx.network() == want
    assert live_sbx.info().network == want.to_json()

    # A name outside the allow list is refused by the sandbox's own resolver
    # (nothing leaves the host), and the refusal is in the log.
    name = "refused-py-sdk.example.net"
    live_sbx.exec(f"getent hosts {name}; true", timeout_ms=20_000)

    def refused() -> list[EgressEvent]:
        return [e for e in live_sbx.egress() if e.name.rstrip(".") == name and e.verdict == "refused"]

    events = wait_until(refused, timeout=10)
    log = live_sbx.egress()
    assert isinstance(log, list) and all(isinstance(e, EgressEvent) for e in log), f"got {log}"
    assert events, f"no refused event for {name} in {log}"
    assert events[0].kind and events[0].time is not None, f"got {events[0]}"

    live_sbx.set_network(internet=False)
    assert live_sbx.network() == Network(internet=False, allow=[])
    with pytest.raises(APIError) as ei:
        live_sbx.set_network(internet=False, allow=["x.example"])
    assert ei.value.code == "invalid_request", f"got {ei.value!r}"


@pytest.mark.live
def test_live_network_of_unknown_sandbox(live_server: dict[str, str]) -> None:
    box = Sandbox("sbx-does-not-exist", **live_server)
    for call in (box.network, box.egress, lambda: box.set_network(internet=True)):
        with pytest.raises(APIError) as ei:
            call()
        assert ei.value.code == "not_found", f"got {ei.value!r}"
