"""run_code and contexts: request bodies, event parsing and errors (against
the fake server; test_code_live.py runs the same against real kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from withruntime import APIError, Context, Execution, ExecutionError, Result, Sandbox, TransportError


def events(*evs):
    return lambda req: list(evs)


def code_bodies(fake) -> list:
    return [json.loads(r.body) for r in fake.state.requests if r.path.endswith("/code")]


def test_bodies_carry_only_what_was_given(fake, sbx: Sandbox) -> None:
    sbx.run_code("1")
    sbx.run_code("", context="ctx_0123456789abcdef", timeout_ms=1500, env={"A": "b"})
    sbx.run_code("2", context=Context("ctx_1", "python", "/workspace"), timeout_ms=0)
    assert code_bodies(fake) == [
        {"code": "1"},
        {"code": "", "context_id": "ctx_0123456789abcdef", "timeout_ms": 1500, "env": {"A": "b"}},
        {"code": "2", "context_id": "ctx_1"},
    ]


def test_bad_arguments_are_refused_locally(fake, sbx: Sandbox) -> None:
    with pytest.raises(ValueError):
        sbx.run_code("1", timeout_ms=-1)
    with pytest.raises(ValueError):
        sbx.run_code("1", context="")
    with pytest.raises(TypeError):
        sbx.run_code(b"1")  # type: ignore[arg-type]
    assert code_bodies(fake) == []


def test_events_become_an_execution_and_callbacks_see_them_in_order(fake, sbx: Sandbox) -> None:
    seen: list = []
    fake.state.code_handler = events(
        {"type": "stdout", "text": "one\n"},
        {"type": "stderr", "text": "warn\n"},
        ("sleep", 0.3),
        {"type": "result", "result": {"png": "iVBORw0KGgo=", "text": "<Figure size 640x480 with 1 Axes>"}},
        {"type": "stdout", "text": "two\n"},
        {"type": "something_new", "x": 1},
        {"type": "result", "result": {"text": "{'a': 1}", "json": {"a": 1}, "html": "<b>a</b>", "is_main_result": True}},
        {"type": "end", "execution_count": 7},
    )
    t0 = time.monotonic()
    ex = sbx.run_code(
        "x",
        on_stdout=lambda s: seen.append(("out", s, time.monotonic() - t0)),
        on_stderr=lambda s: seen.append(("err", s, time.monotonic() - t0)),
        on_result=lambda r: seen.append(("result", r, time.monotonic() - t0)),
    )
    assert [(k, v if k != "result" else v.formats()) for k, v, _ in seen] == [
        ("out", "one\n"),
        ("err", "warn\n"),
        ("result", ["text", "png"]),
        ("out", "two\n"),
        ("result", ["text", "html", "json"]),
    ]
    # Streamed, not buffered: the first lines came before the pause.
    assert seen[1][2] < 0.25 <= seen[2][2]
    assert isinstance(ex, Execution)
    assert ex.logs.stdout == ["one\n", "two\n"] and ex.logs.stderr == ["warn\n"]
    assert ex.error is None and ex.execution_count == 7
    assert len(ex.results) == 2
    assert ex.results[0].png == "iVBORw0KGgo=" and not ex.results[0].is_main_result
    assert ex.results[1].json == {"a": 1} and ex.results[1].html == "<b>a</b>"
    assert ex.text == "{'a': 1}"


def test_no_main_result_has_no_text(fake, sbx: Sandbox) -> None:
    fake.state.code_handler = events({"type": "stdout", "text": "hi\n"}, {"type": "end", "execution_count": 1})
    ex = sbx.run_code("print('hi')")
    assert ex.text is None and ex.results == []
    assert str(ex) == "stdout:\nhi"


def test_exceptions_and_timeouts_are_data(fake, sbx: Sandbox) -> None:
    tb = "Traceback (most recent call last):\n  Cell In[3], line 1\n    1/0\nZeroDivisionError: division by zero\n"
    fake.state.code_handler = events(
        {"type": "stdout", "text": "before\n"},
        {"type": "exception", "exception": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": tb}},
        {"type": "end", "execution_count": 3},
    )
    ex = sbx.run_code("print('before')\n1/0")
    assert ex.error == ExecutionError("ZeroDivisionError", "division by zero", tb)
    assert ex.logs.stdout == ["before\n"] and ex.execution_count == 3
    text = str(ex)
    assert text.startswith("stdout:\nbefore\nerror: ZeroDivisionError: division by zero\nTraceback")
    assert "1/0" in text

    value = "the cell ran longer than timeout_ms=100 and was interrupted; the context keeps its state"
    fake.state.code_handler = events(
        {"type": "exception", "exception": {"name": "TimeoutError", "value": value, "traceback": ""}},
        {"type": "end"},
    )
    ex = sbx.run_code("while True: pass", timeout_ms=100)
    assert ex.error is not None and ex.error.name == "TimeoutError" and ex.error.value == value
    assert str(ex) == f"error: TimeoutError: {value}"


def test_platform_error_event_raises_api_error(fake, sbx: Sandbox) -> None:
    fake.state.code_handler = events(
        {"type": "stdout", "text": "partial\n"},
        {"type": "error", "error": {"code": "lease_ended", "message": "the sandbox's lease ended"}},
    )
    with pytest.raises(APIError) as e:
        sbx.run_code("x")
    assert (e.value.code, e.value.status) == ("lease_ended", 409)
    assert "lease ended" in e.value.message


def test_error_answers_raise_api_error(fake, sbx: Sandbox) -> None:
    fake.state.fail_with("POST", "code", 400, "invalid_request", "language 'r' is not supported")
    with pytest.raises(APIError) as e:
        sbx.run_code("x")
    assert (e.value.code, e.value.status) == ("invalid_request", 400)


@pytest.mark.parametrize(
    "evs, match",
    [
        (({"type": "stdout", "text": "x"}, ("cut",)), "without an end event|broke"),
        (({"type": "stdout", "text": "x"},), "without an end event"),
        ((b"{not json\n",), "malformed"),
        ((b"[1, 2]\n",), "malformed"),
        (({"type": "result"},), "no result"),
    ],
)
def test_broken_streams_are_transport_errors(fake, sbx: Sandbox, evs, match) -> None:
    fake.state.code_handler = events(*evs)
    with pytest.raises(TransportError, match=match):
        sbx.run_code("x")


def test_connection_is_reused_after_a_whole_stream(fake, sbx: Sandbox) -> None:
    sbx.run_code("1")
    sbx.run_code("2")
    sbx.info()
    assert len(fake.state.client_ports) == 1


def test_reprs_name_images_without_printing_them(fake, sbx: Sandbox) -> None:
    png = "A" * 50_000
    fake.state.code_handler = events(
        {"type": "result", "result": {"png": png, "text": "<Figure>"}},
        {"type": "end", "execution_count": 2},
    )
    ex = sbx.run_code("plt.plot([1, 2])")
    r = repr(ex)
    assert png not in r and "formats=['text', 'png']" in r and "execution_count=2" in r
    assert str(ex) == "display [png]:\n<Figure>"
    assert repr(Result(text="3", is_main_result=True)) == "Result(text='3', formats=['text'], is_main_result=True)"


def test_contexts_resource(fake, sbx: Sandbox) -> None:
    a = sbx.contexts.create(cwd="proj", env={"K": "v"})
    b = sbx.contexts.create()
    assert isinstance(a, Context) and a.id.startswith("ctx_") and a.cwd == "/workspace/proj"
    assert a.language == "python" and b.cwd == "/workspace"
    assert [c.id for c in sbx.contexts.list()] == [a.id, b.id]
    assert sbx.contexts.restart(a) == a
    sbx.contexts.remove(b.id)
    assert [c.id for c in sbx.contexts.list()] == [a.id]
    creates = [json.loads(r.body) for r in fake.state.requests if r.method == "POST" and r.path.endswith("/contexts")]
    assert creates == [{"cwd": "proj", "env": {"K": "v"}}, {}]
    paths = [(r.method, r.path.split("/v1/sandboxes/")[1]) for r in fake.state.requests if "/contexts/" in r.path]
    assert paths == [("POST", f"{sbx.id}/contexts/{a.id}/restart"), ("DELETE", f"{sbx.id}/contexts/{b.id}")]
    with pytest.raises(APIError) as e:
        sbx.contexts.restart("ctx_missing")
    assert e.value.code == "not_found"
    with pytest.raises(ValueError):
        sbx.contexts.remove("")


def test_importing_withruntime_imports_no_framework() -> None:
    code = "import sys, withruntime, withruntime.tools, withruntime.code; print(sorted({'smolagents', 'langchain_core', 'agents', 'mcp'} & set(sys.modules)))"
    sdk = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=sdk)
    assert out.stdout.strip() == "[]"
