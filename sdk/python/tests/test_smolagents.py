"""withruntime.smolagents.WithruntimeExecutor: a real smolagents CodeAgent,
driven by a scripted model (no network), runs its code steps in a live
sandbox (marked `live`; needs smolagents, which scripts/pyenv.sh installs:
run with that environment's python)."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest

import withruntime

try:
    import smolagents
    from smolagents import CodeAgent, tool
except ImportError as e:  # pragma: no cover - depends on the environment
    pytest.skip(
        f"smolagents is not importable ({e}): run with the environment scripts/pyenv.sh makes",
        allow_module_level=True,
    )

from withruntime.smolagents import WithruntimeExecutor  # noqa: E402
from withruntime.tools import code_tools, sandbox_tools  # noqa: E402

from conftest import SMALL  # noqa: E402
import readme  # noqa: E402
from scripted_smolagents import ScriptedModel, observations, run_and_read  # noqa: E402


@tool
def leave_note(text: str) -> str:
    """Writes a note into /workspace/note.txt and says so.

    Args:
        text: The note to write.
    """
    with open("/workspace/note.txt", "w") as f:
        f.write(text)
    return "noted " + text


def test_smolagents_is_the_pinned_version() -> None:
    assert smolagents.__version__ == "1.26.0"


@pytest.mark.live
def test_code_agent_runs_its_steps_in_one_sandbox(live_server: dict[str, str]) -> None:
    steps = [
        'x = 21\nprint("x is", x)',
        'y = x * 2\nprint("y is", y)\ny',
        'r = leave_note(text=f"y={y}")\nprint("tool said:", r)',
        'out = runtime_exec(command="cat /workspace/note.txt; echo; id -u; pwd")\n'
        'print(out["stdout"])\nprint("exit", out["exit_code"])',
        'final_answer(f"{y}:{runtime_read_file(path=\'note.txt\')}")',
    ]
    model = ScriptedModel(steps)
    # The snippet, with the scripted model in place of a real one.
    agent = CodeAgent(tools=[leave_note], model=model, executor=WithruntimeExecutor(timeout_seconds=900))
    sbx = agent.python_executor.sandbox
    try:
        info = sbx.info()
        assert info.state == "running"
        assert info.metadata == {"created_by": "withruntime.smolagents"}
        # timeout_seconds is the new sandbox's lease (renewed before each step).
        assert info.lease_ends_at and info.created_at
        assert 800 < (info.lease_ends_at - info.created_at).total_seconds() <= 960
        answer = agent.run("Double 21, note it, and check the note from a shell.")
        obs = observations(agent)
        note = sbx.files.read("note.txt")
    finally:
        agent.cleanup()

    assert answer == "42:y=42"
    # The tool ran in the sandbox: the note is there.
    assert note == "y=42"
    assert model.calls == len(steps)
    assert len(obs) == len(steps), obs
    assert "x is 21" in obs[0]
    # The variable of step 1 lived on in the kernel; the cell's value is the step's output.
    assert "y is 42" in obs[1] and obs[1].rstrip().endswith("Last output from code snippet:\n42")
    assert "tool said: noted y=42" in obs[2]
    # runtime_exec ran in the sandbox, as the sandbox user, where the tool wrote.
    assert "y=42\n1000\n/workspace\n" in obs[3] and "exit 0" in obs[3]
    # Cleanup stopped the sandbox the executor made.
    ended = withruntime.Sandbox(sbx.id, **live_server).info()
    assert (ended.state, ended.end_reason) == ("ended", "stopped")


@pytest.mark.live
def test_readme_snippet(live_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's executor snippet as written there; only the model it
    # imports from smolagents is a scripted one (the tests have no network).
    model = ScriptedModel(["a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint('fib', a)", "final_answer(a)"])
    monkeypatch.setattr(smolagents, "InferenceClientModel", lambda: model)
    ns: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(readme.blocks("smolagents CodeAgent")[0], "README.md", "exec"), ns)
    agent = ns["agent"]
    assert model.calls == 2
    assert "fib 6765" in observations(agent)[0]
    final = agent.memory.steps[-1]
    assert getattr(final, "is_final_answer", False) and final.action_output == 6765
    ended = withruntime.Sandbox(agent.python_executor.sandbox.id, **live_server).info()
    assert (ended.state, ended.end_reason) == ("ended", "stopped")


def _wheel(name: str, version: str, code: str) -> bytes:
    """A minimal pure-Python wheel, built here: sandboxes have no internet."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": code,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return buf.getvalue()


@pytest.mark.live
def test_a_passed_sandbox_gets_packages_errors_and_is_left_running(live_server: dict[str, str]) -> None:
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/workspace/wheels"}
    with withruntime.Sandbox.create(timeout_seconds=600, env=env, metadata={"test": "sdk-python"}, **SMALL) as sbx:
        sbx.files.write("wheels/wrtinypkg-1.0-py3-none-any.whl", _wheel("wrtinypkg", "1.0", "ANSWER = 7\n"))
        ex = WithruntimeExecutor(additional_imports=["wrtinypkg", "json.*", "numpy", "*"], sandbox=sbx)
        assert ex.installed_packages == ["wrtinypkg", "json.*", "numpy", "*"]
        before = {c.id for c in sbx.contexts.list()}
        assert ex.context.id in before
        steps = [
            "import wrtinypkg\nbad = 1 / 0",
            "import numpy\nprint(int(numpy.arange(4).sum()) + wrtinypkg.ANSWER)",
            "final_answer({'n': wrtinypkg.ANSWER, 'ok': True})",
        ]
        agent = CodeAgent(tools=[], model=ScriptedModel(steps), executor=ex, max_steps=5)
        answer, obs, errors = run_and_read(agent, "Use the package.")
        assert answer == {"n": 7, "ok": True}
        assert any("ZeroDivisionError" in e and "division by zero" in e for e in errors), errors
        assert "13" in obs[1]
        # A sandbox passed in is not stopped; only the executor's context goes.
        assert sbx.info().state == "running"
        assert ex.context.id not in {c.id for c in sbx.contexts.list()}
        # A runtime_* tool given to the agent is served by the kernel's own function.
        ex2 = WithruntimeExecutor(sandbox=sbx)
        tools = [tool(f) for f in sandbox_tools(sbx)]
        agent2 = CodeAgent(
            tools=tools,
            model=ScriptedModel(['final_answer(runtime_exec(command="echo $((6*7))")["stdout"].strip())']),
            executor=ex2,
        )
        try:
            assert agent2.run("Multiply in a shell.") == "42"
        finally:
            agent2.cleanup()
        # runtime_run_code is for tool-calling agents: refused, with the reason.
        ex3 = WithruntimeExecutor(sandbox=sbx)
        agent3 = CodeAgent(tools=[tool(f) for f in code_tools(sbx)], model=ScriptedModel([]), executor=ex3)
        try:
            with pytest.raises(ValueError, match="a CodeAgent's own code already runs in the sandbox"):
                agent3.run("Anything.")
        finally:
            agent3.cleanup()
        assert sbx.info().state == "running"



def test_executor_options_are_checked() -> None:
    # Checked before any sandbox is made or used.
    with pytest.raises(ValueError, match="not with sandbox="):
        WithruntimeExecutor(sandbox=object(), timeout_seconds=600)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shorter than the lease"):
        WithruntimeExecutor(timeout_seconds=60, step_timeout_seconds=60)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="step_timeout_seconds"):
            WithruntimeExecutor(timeout_seconds=60, step_timeout_seconds=bad)


@pytest.mark.live
def test_step_timeout_large_answers_and_long_logs(live_server: dict[str, str]) -> None:
    with withruntime.Sandbox.create(timeout_seconds=600, metadata={"test": "sdk-python"}, **SMALL) as sbx:
        ex = WithruntimeExecutor(sandbox=sbx, step_timeout_seconds=3)
        big = "z" * 1_000_000 + "end"
        steps = [
            "x = 5",
            "while True:\n    pass",
            'print("a" * 60000 + "END")',
            f"final_answer({{'x': x, 'big': 'z' * 1_000_000 + 'end'}})",
        ]
        agent = CodeAgent(tools=[], model=ScriptedModel(steps), executor=ex, max_steps=6)
        answer, obs, errors = run_and_read(agent, "Loop, print, answer.")
        # The endless step was interrupted at its timeout and the model saw
        # the TimeoutError; the kernel kept x.
        assert len(errors) == 1 and "TimeoutError" in errors[0], errors
        assert "timeout_ms=3000 and was interrupted; the context keeps its state" in errors[0]
        # A 1 MB final answer comes back whole (the kernel driver clips an
        # exception's value at 256 KiB), and its file is gone.
        assert answer == {"x": 5, "big": big}
        assert ".withruntime-final-" not in sbx.exec("ls -a /tmp").stdout
        # A step's logs keep their last 50,000 characters, as LocalPythonExecutor's.
        assert "[logs cut: only the last 50000 of 60004 characters are shown]\n" + "a" * 49996 + "END" in obs[2]
        assert "a" * 50000 not in obs[2]


@pytest.mark.live
def test_a_clipped_final_answer_is_an_error(live_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the executor's own way out for large answers, the kernel
    # driver's 256 KiB clip is detected and said, never returned as the answer.
    import withruntime.smolagents as ws

    monkeypatch.setattr(ws, "_FINAL_ANSWER_CODE", "pass")
    with withruntime.Sandbox.create(timeout_seconds=600, metadata={"test": "sdk-python"}, **SMALL) as sbx:
        steps = ["final_answer('z' * 1_000_000)", "final_answer('short')"]
        agent = CodeAgent(tools=[], model=ScriptedModel(steps), executor=WithruntimeExecutor(sandbox=sbx), max_steps=3)
        answer, _, errors = run_and_read(agent, "Answer at length.")
        assert answer == "short"
        assert len(errors) == 1 and "the final answer was cut to 262144 characters" in errors[0], errors


@pytest.mark.live
def test_a_new_kernel_gets_the_tools_and_variables_again(live_server: dict[str, str]) -> None:
    with withruntime.Sandbox.create(timeout_seconds=600, metadata={"test": "sdk-python"}, **SMALL) as sbx:
        ex = WithruntimeExecutor(sandbox=sbx, step_timeout_seconds=3)
        steps = [
            "x = 1",
            "import os\nos._exit(1)",
            'print(runtime_exec(command="echo alive")["stdout"])\ny = leave_note(text=f"v={v}")',
            # A step that ignores the interrupt at its timeout: a new kernel too.
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)",
            'final_answer(f"{v}:" + str([n in globals() for n in ("x", "y")]))',
        ]
        agent = CodeAgent(tools=[leave_note], model=ScriptedModel(steps), executor=ex, max_steps=7)
        answer, obs, errors = run_and_read(agent, "Die and go on.", additional_args={"v": 7})
        assert len(errors) == 2 and "DeadKernelError" in errors[0] and "TimeoutError" in errors[1], errors
        for e in errors:
            assert "the tools, the runtime_* functions and the agent's variables were defined again" in e
        # The tool, runtime_exec, the variable v and final_answer work in each
        # new kernel; x and y of the replaced ones are gone.
        assert "alive" in obs[2]
        assert sbx.files.read("note.txt") == "v=7"
        assert answer == "7:[False, False]"


def test_install_packages_looks_for_the_import_name_of_a_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """smolagents' send_tools asks for "pillow" (a distribution) for a tool
    that needs PIL: with PIL importable nothing is pip-installed; "PIL" asked
    for where it is missing installs "pillow"."""
    import contextlib
    import types

    present = {"PIL"}
    ran: list[list[str]] = []

    def fake_run(code: str, what: str) -> Any:
        import importlib.util

        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda m: object() if m in present else None)
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                exec(code, {})
        finally:
            monkeypatch.setattr(importlib.util, "find_spec", real)
        return types.SimpleNamespace(logs=types.SimpleNamespace(stdout=[buf.getvalue()]))

    ex = object.__new__(WithruntimeExecutor)
    ex._run = fake_run  # type: ignore[method-assign]
    ex.logger = smolagents.AgentLogger(level=smolagents.LogLevel.OFF)
    ex.sandbox = types.SimpleNamespace(  # type: ignore[assignment]
        exec=lambda argv: ran.append(argv) or types.SimpleNamespace(ok=True, exit_code=0, stdout="", stderr="")
    )
    assert ex.install_packages(["pillow"]) == ["pillow"]
    assert ran == [], f"got pip runs {ran}, want none with PIL importable"

    present.clear()
    ex.install_packages(["PIL", "pillow", "wrtinypkg"])
    assert len(ran) == 1 and ran[0][-2:] == ["pillow", "wrtinypkg"], f"got {ran}, want pillow and wrtinypkg installed once"
