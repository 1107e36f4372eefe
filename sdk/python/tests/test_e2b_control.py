"""E2B's control plane, driven by E2B's own Python client (e2b 2.63.0,
unmodified) against the live server's --e2b-listen address (tests marked
`live`; the E2B_* variables come from the e2b_env fixture). Every sandbox
E2B makes is a withruntime sandbox: each test checks it through
withruntime's own API too."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import json
from datetime import datetime, timedelta, timezone
from importlib import metadata
from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402
from withruntime.admin import Client  # noqa: E402

pytestmark = pytest.mark.live


def test_pinned_client() -> None:
    assert metadata.version("e2b") == "2.63.0"


@pytest.fixture
def ours(live_server: dict[str, str]) -> Any:
    """withruntime's view of an E2B sandbox id."""
    return lambda sandbox_id: withruntime.Sandbox(sandbox_id, **live_server)


def _near(got: datetime, want: datetime, slack: float = 30) -> bool:
    return abs((got - want).total_seconds()) <= slack


def test_create_get_info_and_kill(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=120, metadata={"test": "e2b-control", "who": "a b&c=d"},
                             envs={"E2B_TEST_VAR": "from-e2b"})
    try:
        native = ours(sbx.sandbox_id)
        n = native.info()
        assert n.state == "running"
        assert n.metadata == {"test": "e2b-control", "who": "a b&c=d"}
        assert _near(n.lease_ends_at, datetime.now(timezone.utc) + timedelta(seconds=120))
        # envs are the environment of the sandbox's processes.
        assert native.exec(["printenv", "E2B_TEST_VAR"]).stdout.strip() == "from-e2b"

        info = sbx.get_info()
        assert info.sandbox_id == sbx.sandbox_id
        assert info.state == e2b.SandboxState.RUNNING
        assert info.metadata == {"test": "e2b-control", "who": "a b&c=d"}
        assert info.template_id == "base"
        assert info.cpu_count == n.vcpus and info.memory_mb == n.memory_mib
        assert _near(info.end_at, n.lease_ends_at, 1)
        assert info.allow_internet_access is True
        assert info.lifecycle == {"on_timeout": "kill", "auto_resume": False}
    finally:
        assert sbx.kill() is True
    assert ours(sbx.sandbox_id).info().state == "ended"
    assert ours(sbx.sandbox_id).info().end_reason == "stopped"
    # Killed: gone for E2B.
    assert e2b.Sandbox.kill(sbx.sandbox_id) is False
    with pytest.raises(e2b.SandboxNotFoundException):
        e2b.Sandbox.get_info(sbx.sandbox_id)


def test_default_timeout_and_templates(e2b_env: dict[str, str], ours: Any) -> None:
    for template in (None, "base", "code-interpreter-v1"):
        sbx = (e2b.Sandbox.create(template) if template else e2b.Sandbox.create())
        try:
            end = ours(sbx.sandbox_id).info().lease_ends_at
            assert _near(end, datetime.now(timezone.utc) + timedelta(seconds=300)), template
        finally:
            sbx.kill()


def test_unknown_template_is_404_naming_it(e2b_env: dict[str, str]) -> None:
    with pytest.raises(e2b.SandboxException) as exc:
        e2b.Sandbox.create("no-such-template")
    assert "404" in str(exc.value) and "no-such-template" in str(exc.value)


def test_create_from_a_withruntime_template(e2b_env: dict[str, str], live_server: dict[str, str], ours: Any) -> None:
    """A template the account made (here by snapshot) is an E2B template
    id: E2B's client starts from it and sees it named so."""
    src = withruntime.Sandbox.create(timeout_seconds=120, **live_server)
    try:
        src.exec(["sh", "-c", "echo from-the-template > /workspace/mark.txt"])
        src.snapshot("e2b-made")
    finally:
        src.stop()
    sbx = e2b.Sandbox.create("e2b-made", timeout=120)
    try:
        assert sbx.files.read("/workspace/mark.txt") == "from-the-template\n"
        assert sbx.get_info().template_id == "e2b-made"
        assert ours(sbx.sandbox_id).info().template == "e2b-made:latest"
    finally:
        sbx.kill()
        withruntime.Template.delete("e2b-made", **live_server)


def test_unsupported_options_are_refused_by_name(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    before = {s.id for s in withruntime.Sandbox.list(**live_server)}
    for kwargs, name in (
        ({"network": {"deny_out": ["10.0.0.0/8"]}}, "denyOut"),
        ({"network": {"allow_out": ["1.2.3.4"], "deny_out": ["0.0.0.0/0", "8.8.8.8"]}}, "denyOut"),
        ({"mcp": {"github": {}}}, "mcp"),
    ):
        with pytest.raises(e2b.SandboxException) as exc:
            e2b.Sandbox.create(**kwargs)
        assert "400" in str(exc.value) and name in str(exc.value), kwargs
    assert {s.id for s in withruntime.Sandbox.list(**live_server)} == before, "a refused create made a sandbox"


def test_network_options_map_onto_the_policy(e2b_env: dict[str, str], ours: Any) -> None:
    for kwargs, want in (
        ({"allow_internet_access": False}, {"internet": False}),
        ({"network": {"deny_out": ["0.0.0.0/0"]}}, {"internet": False}),
        ({"network": {"allow_out": ["example.org", "*.example.com"], "deny_out": ["0.0.0.0/0"]}},
         {"internet": True, "allow": ["example.org", "*.example.com"]}),
        ({"network": {"allow_out": ["1.1.1.1", "8.8.8.0/24", "example.org"], "deny_out": ["0.0.0.0/0"]}},
         {"internet": True, "allow": ["1.1.1.1", "8.8.8.0/24", "example.org"]}),
        ({"allow_internet_access": True}, {"internet": True}),
    ):
        sbx = e2b.Sandbox.create(timeout=60, **kwargs)
        try:
            net = ours(sbx.sandbox_id).info().network
            assert {k: v for k, v in net.items() if v} == {k: v for k, v in want.items() if v}, kwargs
            assert sbx.get_info().allow_internet_access is want["internet"]
        finally:
            sbx.kill()


def test_list_filters_by_metadata_and_state(e2b_env: dict[str, str]) -> None:
    tag = f"list-{time.time_ns()}"
    made = [e2b.Sandbox.create(timeout=120, metadata={"test": "e2b-control", "tag": tag, "n": str(i)})
            for i in range(3)]
    try:
        made[0].pause()
        ids = {s.sandbox_id for s in made}

        def listed(query: Any, limit: int | None = None) -> list[Any]:
            pages = e2b.Sandbox.list(query=query, limit=limit)
            out: list[Any] = []
            while pages.has_next:
                out.extend(pages.next_items())
            return out

        everyone = listed(e2b.SandboxQuery(metadata={"tag": tag}), limit=2)  # pages of 2: x-next-token
        assert {s.sandbox_id for s in everyone} == ids
        assert all(s.metadata["tag"] == tag for s in everyone)
        one = listed(e2b.SandboxQuery(metadata={"tag": tag, "n": "1"}))
        assert [s.sandbox_id for s in one] == [made[1].sandbox_id]
        running = listed(e2b.SandboxQuery(metadata={"tag": tag}, state=[e2b.SandboxState.RUNNING]))
        assert {s.sandbox_id for s in running} == ids - {made[0].sandbox_id}
        paused = listed(e2b.SandboxQuery(metadata={"tag": tag}, state=[e2b.SandboxState.PAUSED]))
        assert [(s.sandbox_id, s.state) for s in paused] == [(made[0].sandbox_id, e2b.SandboxState.PAUSED)]
        # Keys and values with spaces and separators survive E2B's double encoding.
        odd = listed(e2b.SandboxQuery(metadata={"tag": tag, "n": "2"}))
        assert [s.sandbox_id for s in odd] == [made[2].sandbox_id]
        assert listed(e2b.SandboxQuery(metadata={"tag": tag + " x&y=z"})) == []
    finally:
        for s in made:
            s.kill()
    assert listed(e2b.SandboxQuery(metadata={"tag": tag})) == []


def test_list_order_and_started_after(e2b_env: dict[str, str]) -> None:
    # E2B lists newest first unless asked order="asc", and startedAfter keeps
    # those started at or after the time, each page following the last.
    tag = f"order-{time.time_ns()}"
    made = []
    try:
        for i in range(3):
            made.append(e2b.Sandbox.create(timeout=120, metadata={"test": "e2b-control", "tag": tag}))
        query = e2b.SandboxQuery(metadata={"tag": tag})

        def listed(query: Any, **kwargs: Any) -> list[str]:
            pages = e2b.Sandbox.list(query=query, **kwargs)
            out: list[str] = []
            while pages.has_next:
                out.extend(s.sandbox_id for s in pages.next_items())
            return out

        ids = [s.sandbox_id for s in made]
        assert listed(query, order="asc", limit=2) == ids
        assert listed(query, order="desc") == ids[::-1]
        assert listed(query) == ids[::-1]
        second = made[1].get_info().started_at
        after = e2b.SandboxQuery(metadata={"tag": tag}, started_after=second)
        assert listed(after, order="asc") == ids[1:]
        later = e2b.SandboxQuery(metadata={"tag": tag}, started_after=made[2].get_info().started_at + timedelta(seconds=1))
        assert listed(later) == []
    finally:
        for s in made:
            s.kill()


def test_set_timeout_extends_and_shortens(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=600)
    try:
        native = ours(sbx.sandbox_id)
        sbx.set_timeout(1200)
        assert _near(native.info().lease_ends_at, datetime.now(timezone.utc) + timedelta(seconds=1200))
        sbx.set_timeout(60)  # E2B's set_timeout may shorten
        assert _near(native.info().lease_ends_at, datetime.now(timezone.utc) + timedelta(seconds=60))
        assert _near(sbx.get_info().end_at, native.info().lease_ends_at, 1)
    finally:
        sbx.kill()
    with pytest.raises(e2b.SandboxNotFoundException):
        e2b.Sandbox.set_timeout(sbx.sandbox_id, 60)


def test_set_timeout_zero_expires_now(e2b_env: dict[str, str], ours: Any) -> None:
    # E2B: the timeout counts from now, so 0 expires the sandbox at once and
    # its on_timeout action happens: a pause (memory kept, connect resumes)
    # or the end.
    sbx = e2b.Sandbox.create(timeout=300, lifecycle={"on_timeout": "pause"})
    try:
        sbx.commands.run("echo kept > /tmp/mark")
        sbx.set_timeout(0)
        assert not sbx.is_running()
        assert ours(sbx.sandbox_id).info().state == "paused"
        back = e2b.Sandbox.connect(sbx.sandbox_id, timeout=60)
        assert back.commands.run("cat /tmp/mark").stdout == "kept\n"
    finally:
        sbx.kill()
    gone = e2b.Sandbox.create(timeout=300)
    gone.set_timeout(0)
    assert ours(gone.sandbox_id).info().state == "ended"
    with pytest.raises(e2b.SandboxNotFoundException):
        gone.get_info()
    neg = e2b.Sandbox.create(timeout=60)
    try:
        with pytest.raises(e2b.SandboxException) as exc:
            neg.set_timeout(-1)
        assert "400" in str(exc.value) and neg.is_running()
    finally:
        neg.kill()


def test_connect_running_keeps_the_longer_lease(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=900)
    try:
        native = ours(sbx.sandbox_id)
        end = native.info().lease_ends_at
        same = e2b.Sandbox.connect(sbx.sandbox_id, timeout=60)  # shorter: kept
        assert same.sandbox_id == sbx.sandbox_id
        assert native.info().lease_ends_at == end
        e2b.Sandbox.connect(sbx.sandbox_id, timeout=1800)  # longer: moved
        assert _near(native.info().lease_ends_at, datetime.now(timezone.utc) + timedelta(seconds=1800))
    finally:
        sbx.kill()


def test_pause_and_resume_through_connect(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=300)
    try:
        native = ours(sbx.sandbox_id)
        native.exec(["sh", "-c", "echo kept > /tmp/mark"])
        assert sbx.pause() is True
        assert native.info().state == "paused"
        assert sbx.get_info().state == e2b.SandboxState.PAUSED
        assert sbx.pause() is False  # already paused: 409
        back = e2b.Sandbox.connect(sbx.sandbox_id, timeout=400)
        assert back.sandbox_id == sbx.sandbox_id
        n = native.info()
        assert n.state == "running"
        assert _near(n.lease_ends_at, datetime.now(timezone.utc) + timedelta(seconds=400))
        assert native.exec(["cat", "/tmp/mark"]).stdout == "kept\n"
        assert sbx.get_info().state == e2b.SandboxState.RUNNING
    finally:
        sbx.kill()


def test_lifecycle_pause_on_timeout(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=60, lifecycle={"on_timeout": "pause"})
    try:
        assert ours(sbx.sandbox_id).info().on_lease_end == "pause"
        assert sbx.get_info().lifecycle == {"on_timeout": "pause", "auto_resume": False}
    finally:
        sbx.kill()


def test_lifecycle_auto_resume(e2b_env: dict[str, str], ours: Any) -> None:
    """E2B's {on_timeout: pause, auto_resume: true}: a paused sandbox wakes
    on the next envd call (a command, a file read), which then runs."""
    sbx = e2b.Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause", "auto_resume": True})
    try:
        native = ours(sbx.sandbox_id)
        n = native.info()
        assert n.on_lease_end == "pause" and n.auto_resume is True
        assert sbx.get_info().lifecycle == {"on_timeout": "pause", "auto_resume": True}
        sbx.files.write("/tmp/mark", "kept")
        assert sbx.pause() is True
        assert native.info().state == "paused"
        assert sbx.commands.run("cat /tmp/mark").stdout == "kept"
        assert native.info().state == "running"
        assert sbx.pause() is True
        assert sbx.files.read("/tmp/mark") == "kept"
        assert native.info().state == "running"
    finally:
        sbx.kill()


def test_unknown_sandbox(e2b_env: dict[str, str]) -> None:
    missing = "sbx0000000000000000"
    with pytest.raises(e2b.SandboxNotFoundException):
        e2b.Sandbox.get_info(missing)
    with pytest.raises(e2b.SandboxNotFoundException):
        e2b.Sandbox.connect(missing)
    with pytest.raises(e2b.SandboxNotFoundException):
        e2b.Sandbox.set_timeout(missing, 60)
    assert e2b.Sandbox.kill(missing) is False


def test_a_bad_key(e2b_env: dict[str, str]) -> None:
    with pytest.raises(e2b.AuthenticationException):
        e2b.Sandbox.create(api_key="wr_not-a-key")
    with pytest.raises(e2b.AuthenticationException):
        e2b.Sandbox.list(api_key="wr_not-a-key").next_items()


def test_e2b_prefixed_key(e2b_env: dict[str, str], ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=60, api_key="e2b_" + e2b_env["E2B_API_KEY"])
    try:
        assert ours(sbx.sandbox_id).info().state == "running"
    finally:
        sbx.kill()


@pytest.fixture
def read_only_key(live_server: dict[str, str]) -> Iterator[str]:
    admin = Client(**live_server)
    key = admin.keys.create(read_only=True, name="e2b-read-only")
    try:
        yield key.secret
    finally:
        admin.keys.remove(key.id)


def test_read_only_key(e2b_env: dict[str, str], read_only_key: str, ours: Any) -> None:
    sbx = e2b.Sandbox.create(timeout=120, metadata={"test": "e2b-control-ro"})
    try:
        # It sees...
        assert e2b.Sandbox.get_info(sbx.sandbox_id, api_key=read_only_key).sandbox_id == sbx.sandbox_id
        seen = e2b.Sandbox.list(query=e2b.SandboxQuery(metadata={"test": "e2b-control-ro"}), api_key=read_only_key).next_items()
        assert [s.sandbox_id for s in seen] == [sbx.sandbox_id]
        # ...and changes nothing.
        for call in (lambda: e2b.Sandbox.create(api_key=read_only_key),
                     lambda: e2b.Sandbox.set_timeout(sbx.sandbox_id, 30, api_key=read_only_key),
                     lambda: e2b.Sandbox.kill(sbx.sandbox_id, api_key=read_only_key),
                     lambda: e2b.Sandbox.pause(sbx.sandbox_id, api_key=read_only_key)):
            with pytest.raises(e2b.SandboxException, match="403"):
                call()
        assert ours(sbx.sandbox_id).info().state == "running"
    finally:
        sbx.kill()


def test_out_of_scope_routes_say_what_is_unsupported(e2b_env: dict[str, str]) -> None:
    url = e2b_env["E2B_API_URL"]
    for method, path, feature in (("GET", "/sandboxes/sbx1/logs", "sandbox logs"), ("GET", "/secrets", "secrets API"),
                                  ("GET", "/templates", "template API"), ("DELETE", "/templates/team-app", "template API")):
        req = urllib.request.Request(url + path, method=method, data=b"{}" if method == "POST" else None,
                                     headers={"X-API-KEY": e2b_env["E2B_API_KEY"], "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        body = json.loads(exc.value.read())
        assert exc.value.code == 501 and body["code"] == 501 and feature in body["message"], (path, body)


def test_update_network_replaces_the_policy_of_a_live_sandbox(e2b_env: dict[str, str], ours: Any) -> None:
    # E2B: update_network replaces the egress rules; fields left out are
    # cleared, so an empty update opens the internet again.
    sbx = e2b.Sandbox.create(timeout=60)
    try:
        sbx.update_network({"allow_out": ["1.1.1.1", "10.1.0.0/16"], "deny_out": ["0.0.0.0/0"]})
        net = ours(sbx.sandbox_id).info().network
        assert net["internet"] is True and net["allow"] == ["1.1.1.1", "10.1.0.0/16"]
        sbx.update_network({"deny_out": ["0.0.0.0/0"]})
        assert ours(sbx.sandbox_id).info().network["internet"] is False
        sbx.update_network({})
        net = ours(sbx.sandbox_id).info().network
        assert net["internet"] is True and not net.get("allow")
        with pytest.raises(e2b.SandboxException) as exc:
            sbx.update_network({"deny_out": ["8.8.8.8"]})
        assert "400" in str(exc.value) and "denyOut" in str(exc.value)
        assert ours(sbx.sandbox_id).info().network["internet"] is True, "a refused update changed the policy"
    finally:
        sbx.kill()
