"""Output is bytes: exec(text=False) gives them exactly (against the fake)."""

from __future__ import annotations

import base64

import pytest

from withruntime import CommandError, Sandbox, TransportError

BIN = b"\xff\xfeok\n"


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


STREAM = [
    {"type": "start", "pid": 7},
    {"type": "stdout", "data": "text \u2603 "},
    {"type": "stdout", "data_b64": b64(BIN)},
    {"type": "stderr", "data_b64": b64(b"\x80")},
    {"type": "exit", "exit_code": 1},
]


def test_text_false_returns_the_exact_bytes(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: list(STREAM)
    out: list[bytes] = []
    err: list[bytes] = []
    r = sbx.exec("x", text=False, on_stdout=out.append, on_stderr=err.append)
    assert r.stdout == "text \u2603 ".encode() + BIN
    assert r.stderr == b"\x80"
    assert out == ["text \u2603 ".encode(), BIN]
    assert err == [b"\x80"]


def test_text_is_the_default_and_replaces_what_is_not_utf8(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: list(STREAM)
    out: list[str] = []
    r = sbx.exec("x", on_stdout=out.append)
    assert r.stdout == "text \u2603 \ufffd\ufffdok\n"
    assert r.stderr == "\ufffd"
    assert all(isinstance(c, str) for c in out)


def test_check_with_bytes_says_the_stderr(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: list(STREAM)
    with pytest.raises(CommandError) as e:
        sbx.exec("x", text=False, check=True)
    assert str(e.value) == "command exited with code 1: \ufffd"


def test_broken_base64_is_a_transport_error(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: [
        {"type": "start", "pid": 7},
        {"type": "stdout", "data_b64": "not base64!"},
        {"type": "exit", "exit_code": 0},
    ]
    with pytest.raises(TransportError):
        sbx.exec("x", text=False)


def test_background_output_as_bytes(fake, sbx: Sandbox) -> None:
    p = sbx.exec("x", background=True, text=False)
    fake.state.processes[p.pid].update(stdout="\ufffdok\n", stdout_b64=b64(BIN), stderr="plain")
    assert p.stdout == BIN
    assert p.stderr == b"plain"
    assert sbx.process(p.pid).stdout == "\ufffdok\n"
    assert sbx.process(p.pid, text=False).stdout == BIN
    assert [q.stdout for q in sbx.processes(text=False)] == [BIN]
    fake.state.processes[p.pid].update(running=False, exit_code=0)
    r = p.wait()
    assert (r.stdout, r.stderr) == (BIN, b"plain")
