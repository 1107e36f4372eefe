"""withruntime.tools.code_tools' runtime_run_code: what it returns from an
Execution (results' text and formats, stdout, stderr, the error), its caps,
its timeout, and that smolagents' rules hold (checked with smolagents'
own `tool` where it is installed). The sandbox is a stand-in whose
run_code returns the SDK's own Execution types; the live tests of the
framework adapters run it against a real kernel."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import threading
import typing
from typing import Any

import pytest

from withruntime.code import Execution, ExecutionError, Logs, Result
from withruntime.tools import OUTPUT_CAP, code_tools, sandbox_tools


class StubSandbox:
    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def run_code(self, code: str, timeout_ms: int | None = None) -> Execution:
        with self.lock:
            self.calls.append((code, timeout_ms))
        return self.execution


def test_returns_results_logs_and_error() -> None:
    ex = Execution(
        results=[
            Result(text="<Figure size 640x480 with 1 Axes>", png="iVBORw0KGgo="),
            Result(text="42", is_main_result=True),
            Result(html="<b>x</b>"),
        ],
        logs=Logs(stdout=["a\n", "b\n"], stderr=["warn\n"]),
        error=ExecutionError("ValueError", "bad", "Traceback...\nValueError: bad"),
    )
    run = code_tools(StubSandbox(ex))[0]
    out = run(code="x")
    assert out == {
        "results": ["<Figure size 640x480 with 1 Axes>\n[also as png]", "42", "[also as html]"],
        "stdout": "a\nb\n",
        "stderr": "warn\n",
        "error": {"name": "ValueError", "value": "bad", "traceback": "Traceback...\nValueError: bad"},
    }
    assert list(out) == ["results", "stdout", "stderr", "error"]
    assert code_tools(StubSandbox(Execution()))[0](code="") == {"results": [], "stdout": "", "stderr": "", "error": None}


def test_timeout_default_and_binding() -> None:
    sbx = StubSandbox(Execution())
    run = code_tools(sbx)[0]
    run(code="a")
    run(code="b", timeout_seconds=None)
    run(code="c", timeout_seconds=5)
    code_tools(sbx, timeout_seconds=60)[0](code="d")
    none = code_tools(sbx, timeout_seconds=None)[0]
    none(code="e")
    assert sbx.calls == [("a", 120_000), ("b", 120_000), ("c", 5000), ("d", 60_000), ("e", None)]
    assert "None means 120 seconds." in (run.__doc__ or "")
    assert "None means 60 seconds." in (code_tools(sbx, timeout_seconds=60)[0].__doc__ or "")
    assert "None means no limit but the sandbox's lease." in (none.__doc__ or "")
    with pytest.raises(ValueError):
        run(code="f", timeout_seconds=-1)
    with pytest.raises(ValueError):
        code_tools(sbx, timeout_seconds=0)


class ExecStub:
    def __init__(self) -> None:
        self.timeouts: list[int | None] = []

    def exec(self, cmd: str, cwd: str | None = None, timeout_ms: int | None = None) -> Any:
        self.timeouts.append(timeout_ms)
        return type("R", (), {"exit_code": 0, "stdout": "", "stderr": "", "timed_out": False,
                              "stdout_truncated": False, "stderr_truncated": False})()


def test_a_timeout_of_zero_is_the_default_not_no_limit() -> None:
    # As the MCP tools and the Go client take 0: the default, never "no limit".
    sbx = StubSandbox(Execution())
    code_tools(sbx)[0](code="a", timeout_seconds=0)
    code_tools(sbx, timeout_seconds=60)[0](code="b", timeout_seconds=0)
    code_tools(sbx, timeout_seconds=None)[0](code="c", timeout_seconds=0)
    assert sbx.calls == [("a", 120_000), ("b", 60_000), ("c", None)]
    ex = ExecStub()
    sandbox_tools(ex)[0](command="true", timeout_seconds=0)  # type: ignore[arg-type]
    sandbox_tools(ex, timeout_seconds=30)[0](command="true", timeout_seconds=0)  # type: ignore[arg-type]
    sandbox_tools(ex)[0](command="true", timeout_seconds=None)  # type: ignore[arg-type]
    assert ex.timeouts == [120_000, 30_000, 120_000]
    for fn in (code_tools(sbx)[0], sandbox_tools(ex)[0]):  # type: ignore[arg-type]
        assert "timeout_seconds of 0 is the same as None" in (fn.__doc__ or "")


def test_caps_what_it_returns() -> None:
    big = "x" * (OUTPUT_CAP + 500)
    ex = Execution(
        results=[Result(text=big), Result(text="second"), Result(text="third")],
        logs=Logs(stdout=["1" * OUTPUT_CAP, "2" * 10], stderr=["e" * (OUTPUT_CAP + 1)]),
        error=ExecutionError("RecursionError", "deep", "t" * (OUTPUT_CAP + 7)),
    )
    out = code_tools(StubSandbox(ex))[0](code="x")
    first = out["results"][0]
    assert first.startswith("x" * OUTPUT_CAP) and first.count("x") == OUTPUT_CAP
    assert f"only its first {OUTPUT_CAP} of {OUTPUT_CAP + 500} characters" in first
    assert out["results"][1:] == ["[2 more results not shown]"]
    assert out["stdout"].startswith("[stdout was cut: only its last 20000 characters are shown]\n")
    assert out["stdout"].endswith("2" * 10) and len(out["stdout"]) < OUTPUT_CAP + 100
    assert out["stderr"].startswith("[stderr was cut")
    assert out["error"]["traceback"].startswith("[traceback was cut") and len(out["error"]["traceback"]) < OUTPUT_CAP + 100
    assert len(str(out)) < 5 * OUTPUT_CAP


def test_follows_smolagents_rules() -> None:
    run = code_tools(StubSandbox(Execution()))[0]
    assert run.__name__ == "runtime_run_code"
    assert inspect.getsource(run).lstrip().startswith("def runtime_run_code(")
    hints = typing.get_type_hints(run)
    assert hints == {"code": str, "timeout_seconds": typing.Optional[int], "return": dict}, hints
    doc = inspect.getdoc(run) or ""
    head, args = doc.split("\nArgs:\n")
    assert head.strip()
    assert [line.split(":")[0].strip() for line in args.strip().splitlines()] == ["code", "timeout_seconds"]
    smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed: run the tests in scripts/pyenv.sh's environment")
    t = smolagents.tool(run)
    assert t.name == "runtime_run_code"
    assert sorted(t.inputs) == ["code", "timeout_seconds"]
    assert t.inputs["timeout_seconds"].get("nullable") is True
    assert t.output_type == "object"


def test_sandbox_tools_still_returns_the_four() -> None:
    assert [f.__name__ for f in sandbox_tools(StubSandbox(Execution()))] == [
        "runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]


def test_importing_withruntime_imports_no_framework() -> None:
    # A fresh interpreter: this one has the frameworks loaded by other tests.
    code = (
        "import sys, withruntime, withruntime.tools, withruntime.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'langchain_core', 'agents', 'openai', 'smolagents', 'mcp', 'pydantic'})\n"
        "assert not bad, bad\n"
        "print('clean')\n"
    )
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "clean\n", p.stderr


def test_a_timeout_speaks_of_timeout_seconds() -> None:
    msg = "the cell ran longer than timeout_ms=2500 and was interrupted; the context keeps its state"
    ex = Execution(error=ExecutionError("TimeoutError", msg, ""))
    out = code_tools(StubSandbox(ex))[0](code="x", timeout_seconds=2.5)
    assert out["error"]["value"] == (
        "the cell ran longer than timeout_seconds=2.5 and was interrupted; the context keeps its state"
    ), f"got {out['error']['value']!r}"
    # Another error's text is the model's own and stays as it is.
    other = Execution(error=ExecutionError("ValueError", "timeout_ms=5", ""))
    assert code_tools(StubSandbox(other))[0](code="x")["error"]["value"] == "timeout_ms=5"
