"""What a hostile or broken server stream must not do to the client: fill
its memory with one endless line or with what follows the last event,
make it misreport numbers it cannot represent, or time a cell out while
it still waits for its turn (against the fake and canned servers)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from cannedserver import CannedServer, canned  # noqa: F401 - a fixture

import withruntime.code
from withruntime import Context, Sandbox, TransportError

MiB = 1024 * 1024


def events(*evs):
    return lambda req: list(evs)


def bodies(fake, suffix: str) -> list:
    return [json.loads(r.body) for r in fake.state.requests if r.path.endswith(suffix)]


# -- line bounds ----------------------------------------------------------------


def test_code_line_over_the_bound_is_a_transport_error(fake, sbx: Sandbox) -> None:
    big = {"type": "stdout", "text": "x" * (9 * MiB + 10)}
    fake.state.code_handler = events(big, {"type": "end", "execution_count": 1})
    with pytest.raises(TransportError, match="longer than"):
        sbx.run_code("x")


def test_code_line_under_the_servers_guard_is_read(fake, sbx: Sandbox) -> None:
    # A result of 2 x 4 MiB fields: near the server's 8 MiB line guard.
    r = {"png": "A" * (4 * MiB - 10), "jpeg": "B" * (4 * MiB - 10), "text": "<Figure>"}
    fake.state.code_handler = events({"type": "result", "result": r}, {"type": "end", "execution_count": 3})
    ex = sbx.run_code("x")
    assert len(ex.results) == 1 and len(ex.results[0].png or "") == 4 * MiB - 10, "got a cut result"
    assert ex.execution_count == 3


def test_exec_line_over_the_bound_is_a_transport_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events(
        {"type": "stdout", "data": "y" * (MiB + 10)}, {"type": "exit", "exit_code": 0}
    )
    with pytest.raises(TransportError, match="longer than"):
        sbx.exec("x")


def test_exec_line_under_the_bound_is_read(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "stdout", "data": "y" * 300_000}, {"type": "exit", "exit_code": 0})
    assert len(sbx.exec("x").stdout) == 300_000


# -- what follows the terminal event ----------------------------------------------


def test_only_a_little_after_the_end_event_is_read(fake, sbx: Sandbox) -> None:
    sent = {"mib": 0}

    def handler(req) -> Iterator:
        yield {"type": "end", "execution_count": 1}
        for _ in range(64):
            yield b"z" * MiB
            sent["mib"] += 1

    fake.state.code_handler = handler
    ex = sbx.run_code("x")
    assert ex.execution_count == 1
    # The client closes the connection after 64 KiB: the server's writes
    # fail once the socket buffers are full, long before 64 MiB.
    deadline = time.monotonic() + 10
    while sent["mib"] < 64 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sent["mib"] < 32, f"got {sent['mib']} MiB sent after the end event, want the client gone first"
    # The next call works on a new connection.
    fake.state.code_handler = None
    assert sbx.run_code("2").text == "2"


# -- read timeouts ----------------------------------------------------------------


def test_waiting_for_the_turn_is_not_timed(fake, sbx: Sandbox, monkeypatch) -> None:
    monkeypatch.setattr(withruntime.code, "_READ_SLACK", 0.3)

    def queued(req):
        time.sleep(1.5)  # the cell waits behind another before the headers go out
        return [{"type": "stdout", "text": "ran\n"}, {"type": "end", "execution_count": 2}]

    fake.state.code_handler = queued
    ex = sbx.run_code("x", timeout_ms=100)
    assert ex.logs.stdout == ["ran\n"] and ex.execution_count == 2


def test_a_silent_stream_is_still_timed(fake, sbx: Sandbox, monkeypatch) -> None:
    monkeypatch.setattr(withruntime.code, "_READ_SLACK", 0.3)
    fake.state.code_handler = events({"type": "stdout", "text": "a"}, ("sleep", 2), {"type": "end"})
    with pytest.raises(TransportError, match="broke"):
        sbx.run_code("x", timeout_ms=100)


# -- numbers and shapes -----------------------------------------------------------


@pytest.mark.parametrize("count", [float("inf"), float("nan"), "7", 1.5, True, [1]])
def test_bad_execution_count_is_a_transport_error(fake, sbx: Sandbox, count) -> None:
    fake.state.code_handler = events({"type": "end", "execution_count": count})
    with pytest.raises(TransportError, match="execution_count"):
        sbx.run_code("x")


@pytest.mark.parametrize("code", [float("inf"), "0", 2.5])
def test_bad_exit_code_is_a_transport_error(fake, sbx: Sandbox, code) -> None:
    fake.state.exec_handler = events({"type": "exit", "exit_code": code})
    with pytest.raises(TransportError, match="exit_code"):
        sbx.exec("x")


SID = "sbx-1"
BASE = f"/v1/sandboxes/{SID}"


@pytest.mark.parametrize("answer", [[1], "ctx", 5, {"id": 5}, {"id": ""}, {"cwd": "/w"}])
def test_context_answers_not_a_context_are_transport_errors(canned: CannedServer, answer) -> None:
    box = Sandbox(SID, api_key="k", base_url=canned.base_url)
    canned.answer("POST", BASE + "/contexts", 201, answer)
    canned.answer("POST", BASE + "/contexts/ctx_1/restart", 200, answer)
    with pytest.raises(TransportError):
        box.contexts.create()
    with pytest.raises(TransportError):
        box.contexts.restart("ctx_1")


@pytest.mark.parametrize("answer", [[1], "x", 5, {"contexts": 5}, {"contexts": {"id": "a"}}, {"contexts": [1]}])
def test_list_answers_not_a_list_are_transport_errors(canned: CannedServer, answer) -> None:
    box = Sandbox(SID, api_key="k", base_url=canned.base_url)
    canned.answer("GET", BASE + "/contexts", 200, answer)
    with pytest.raises(TransportError):
        box.contexts.list()


def test_good_context_answers_still_parse(canned: CannedServer) -> None:
    box = Sandbox(SID, api_key="k", base_url=canned.base_url)
    c = {"id": "ctx_1", "language": "python", "cwd": "/workspace"}
    canned.answer("GET", BASE + "/contexts", 200, {"contexts": [c]})
    assert box.contexts.list() == [Context("ctx_1", "python", "/workspace")]
    canned.answer("GET", BASE + "/contexts", 200, {"contexts": None})
    assert box.contexts.list() == []


# -- timeout_ms -------------------------------------------------------------------


def test_fractional_timeouts_round_up(fake, sbx: Sandbox) -> None:
    sbx.run_code("1", timeout_ms=0.5)
    sbx.run_code("2", timeout_ms=1500.2)
    sbx.run_code("3", timeout_ms=0)
    sbx.exec("true", timeout_ms=0.5)
    assert [b.get("timeout_ms") for b in bodies(fake, "/code")] == [1, 1501, None]
    assert bodies(fake, "/exec")[0]["timeout_ms"] == 1


@pytest.mark.parametrize("bad", [-1, -0.5, "5", True, float("nan"), float("inf"), [5]])
def test_bad_timeouts_are_refused_locally(fake, sbx: Sandbox, bad) -> None:
    with pytest.raises(ValueError):
        sbx.run_code("1", timeout_ms=bad)
    with pytest.raises(ValueError):
        sbx.exec("true", timeout_ms=bad)
    assert bodies(fake, "/code") == [] and bodies(fake, "/exec") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "stdout", "text": {"a": 1}},
        {"type": "stderr", "text": 5},
        {"type": "exception", "exception": {"name": ["x"], "value": "v"}},
    ],
)
def test_event_fields_not_strings_are_transport_errors(fake, sbx: Sandbox, bad) -> None:
    fake.state.code_handler = events(bad, {"type": "end"})
    with pytest.raises(TransportError, match="not a string"):
        sbx.run_code("x")


def test_result_fields_not_strings_are_dropped(fake, sbx: Sandbox) -> None:
    fake.state.code_handler = events(
        {"type": "result", "result": {"text": "t", "png": {"x": 1}, "html": 5}}, {"type": "end"}
    )
    r = sbx.run_code("x").results[0]
    assert (r.text, r.png, r.html) == ("t", None, None)
