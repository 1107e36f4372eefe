"""exec: streaming, results, errors, background processes (against the fake)."""

from __future__ import annotations

import json
import threading
import time

import pytest

import withruntime.process
from withruntime import APIError, CommandError, ExecResult, Process, Sandbox, TransportError


def events(*evs):
    return lambda req: list(evs)


def test_shell_and_argv_bodies(fake, sbx: Sandbox) -> None:
    sbx.exec("echo hi")
    sbx.exec(["python3", "-c", "print(1)"], cwd="proj", env={"A": "b"}, timeout_ms=5000, stdin="input")
    bodies = [json.loads(r.body) for r in fake.state.requests if r.path.endswith("/exec")]
    assert bodies[0] == {"cmd": "echo hi"}
    assert bodies[1] == {
        "cmd": ["python3", "-c", "print(1)"],
        "cwd": "proj",
        "env": {"A": "b"},
        "timeout_ms": 5000,
        "stdin": "input",
    }


def test_bad_commands_are_refused_locally(sbx: Sandbox) -> None:
    with pytest.raises(ValueError):
        sbx.exec("")
    with pytest.raises(ValueError):
        sbx.exec([])
    with pytest.raises(TypeError):
        sbx.exec(b"echo")  # type: ignore[call-overload]


def test_result(sbx: Sandbox) -> None:
    r = sbx.exec("echo hello")
    assert isinstance(r, ExecResult)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (0, "hello\n", "", False)
    assert r.pid == 42 and r.duration_ms == 3 and r.ok


def test_callbacks_in_order_as_produced(fake, sbx: Sandbox) -> None:
    seen: list[tuple[str, str, float]] = []
    fake.state.exec_handler = events(
        {"type": "start", "pid": 7},
        {"type": "stdout", "data": "one\n"},
        {"type": "stderr", "data": "warn\n"},
        ("sleep", 0.3),
        {"type": "stdout", "data": "two\n"},
        {"type": "stderr", "data": "err2\n"},
        {"type": "stdout", "data": "three"},
        {"type": "exit", "exit_code": 0},
    )
    t0 = time.monotonic()
    r = sbx.exec(
        "x",
        on_stdout=lambda s: seen.append(("out", s, time.monotonic() - t0)),
        on_stderr=lambda s: seen.append(("err", s, time.monotonic() - t0)),
    )
    assert [(k, s) for k, s, _ in seen] == [
        ("out", "one\n"),
        ("err", "warn\n"),
        ("out", "two\n"),
        ("err", "err2\n"),
        ("out", "three"),
    ]
    # The first lines arrived before the pause: streamed, not buffered.
    assert seen[1][2] < 0.25 and seen[2][2] >= 0.25
    assert (r.stdout, r.stderr) == ("one\ntwo\nthree", "warn\nerr2\n")


def test_non_zero_exit_is_returned(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "stderr", "data": "boom\n"}, {"type": "exit", "exit_code": 2})
    r = sbx.exec("false")
    assert r.exit_code == 2 and not r.ok and r.stderr == "boom\n"


def test_check_raises_command_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "stderr", "data": "no such thing\n"}, {"type": "exit", "exit_code": 127})
    with pytest.raises(CommandError) as e:
        sbx.exec("nope", check=True)
    assert e.value.result.exit_code == 127
    assert "127" in str(e.value) and "no such thing" in str(e.value)


def test_check_passes_on_zero(sbx: Sandbox) -> None:
    assert sbx.exec("echo ok", check=True).stdout == "ok\n"


def test_timeout_flag(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "exit", "exit_code": -1, "timed_out": True})
    r = sbx.exec("sleep 100", timeout_ms=100)
    assert r.timed_out and r.exit_code == -1
    with pytest.raises(CommandError, match="timed out"):
        r.check()


def test_error_event_is_api_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events(
        {"type": "start", "pid": 1},
        {"type": "stdout", "data": "partial"},
        {"type": "error", "error": {"code": "lease_ended", "message": "the lease ended"}},
    )
    with pytest.raises(APIError) as e:
        sbx.exec("long")
    assert (e.value.code, e.value.status, e.value.message) == ("lease_ended", 409, "the lease ended")


def test_stream_ending_without_exit_is_transport_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "start", "pid": 1}, {"type": "stdout", "data": "x"})
    with pytest.raises(TransportError, match="without an exit event"):
        sbx.exec("x")
    # The connection is usable again afterwards.
    fake.state.exec_handler = None
    assert sbx.exec("echo again").stdout == "again\n"


def test_cut_stream_is_transport_error(fake, sbx: Sandbox) -> None:
    got: list[str] = []
    fake.state.exec_handler = events({"type": "start", "pid": 1}, {"type": "stdout", "data": "before cut\n"}, ("cut",))
    with pytest.raises(TransportError):
        sbx.exec("x", on_stdout=got.append)
    assert got == ["before cut\n"]
    fake.state.exec_handler = None
    assert sbx.exec("echo after").stdout == "after\n"


def test_malformed_event_is_transport_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "start", "pid": 1}, "this is not json\n")
    with pytest.raises(TransportError, match="malformed"):
        sbx.exec("x")


def test_unknown_events_are_skipped(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = events({"type": "heartbeat"}, {"type": "stdout", "data": "a"}, {"type": "exit", "exit_code": 0})
    assert sbx.exec("x").stdout == "a"


def test_exec_refused_is_api_error(fake, sbx: Sandbox) -> None:
    sbx.pause()
    with pytest.raises(APIError) as e:
        sbx.exec("echo x")
    assert (e.value.code, e.value.status) == ("conflict", 409)


def test_callback_exception_propagates_and_connection_recovers(fake, sbx: Sandbox) -> None:
    def bad(_: str) -> None:
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        sbx.exec("echo x", on_stdout=bad)
    assert sbx.exec("echo y").stdout == "y\n"


def test_nested_request_from_callback(fake, sbx: Sandbox) -> None:
    # A request made from inside a callback, on the thread whose connection
    # is busy with the stream, uses a second connection.
    states: list[str] = []
    sbx.exec("echo x", on_stdout=lambda _: states.append(sbx.info().state))
    assert states == ["running"]


def test_output_kept_is_capped(fake, sbx: Sandbox, monkeypatch) -> None:
    monkeypatch.setattr(withruntime.process, "OUTPUT_LIMIT", 10)
    chunks = [{"type": "stdout", "data": f"{i:04d}\n"} for i in range(100)]
    fake.state.exec_handler = events(*chunks, {"type": "stderr", "data": "short"}, {"type": "exit", "exit_code": 0})
    seen: list[str] = []
    r = sbx.exec("x", on_stdout=seen.append)
    assert len(seen) == 100, "callbacks see everything"
    assert r.stdout == "0098\n0099\n" and r.stdout_truncated
    assert r.stderr == "short" and not r.stderr_truncated


def test_background_process(fake, sbx: Sandbox) -> None:
    fake.state.polls_until_exit = 3
    p = sbx.exec("python3 server.py", background=True)
    assert isinstance(p, Process)
    assert p.pid == 100 and p.cmd == "python3 server.py"
    body = json.loads([r for r in fake.state.requests if r.path.endswith("/exec")][-1].body)
    assert body == {"cmd": "python3 server.py", "background": True}
    assert p.is_running
    r = p.wait(timeout=10)
    assert (r.exit_code, r.timed_out, r.pid) == (3, False, 100)
    assert "tick 0" in r.stdout and r.stderr == "done\n"
    assert not p.is_running and p.exit_code == 3 and p.poll() == 3
    waits = [r for r in fake.state.requests if r.query.get("wait") == "true"]
    assert waits and all(int(w.query["timeout_ms"]) > 0 for w in waits)


def test_background_output_so_far(fake, sbx: Sandbox) -> None:
    p = sbx.exec("x", background=True)
    fake.state.processes[p.pid]["stdout"] = "so far\n"
    assert p.stdout == "so far\n"
    fake.state.processes[p.pid]["stdout"] = "so far\nmore\n"
    assert p.stdout == "so far\nmore\n"


def test_background_wait_timeout(fake, sbx: Sandbox) -> None:
    fake.state.polls_until_exit = 10**6
    p = sbx.exec("sleep 1000", background=True)
    with pytest.raises(TimeoutError):
        p.wait(timeout=0.2)


def test_background_kill(fake, sbx: Sandbox) -> None:
    fake.state.polls_until_exit = 10**6
    p = sbx.exec("sleep 1000", background=True)
    p.kill()
    assert not p.is_running
    r = p.wait()
    assert r.exit_code == -1  # killed: no exit code of its own
    assert [q.pid for q in sbx.processes()] == [p.pid]
    assert sbx.process(p.pid).pid == p.pid


def test_background_check_applies_to_wait(fake, sbx: Sandbox) -> None:
    fake.state.polls_until_exit = 1
    p = sbx.exec("x", background=True, check=True)
    with pytest.raises(CommandError):
        p.wait()


def test_background_refuses_callbacks(sbx: Sandbox) -> None:
    with pytest.raises(ValueError):
        sbx.exec("x", background=True, on_stdout=print)  # type: ignore[call-overload]


def test_parallel_execs_do_not_mix(fake, sbx: Sandbox) -> None:
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = sbx.exec(f"echo {i}").stdout

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{i}\n" for i in range(12)}
