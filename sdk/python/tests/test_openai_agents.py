"""withruntime.openai_agents against a real server and sandbox (marked
`live`): an agent whose scripted Model calls the tools runs with
Runner.run_sync, and the test checks the tool outputs the SDK fed back to
the model.

Needs openai-agents (scripts/pyenv.sh installs it); skipped without it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("agents", reason="openai-agents is not installed: run the tests in scripts/pyenv.sh's environment")

from agents import Agent, FunctionTool, RunConfig, Runner  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from withruntime import Sandbox  # noqa: E402
from withruntime.openai_agents import sandbox_tools  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

FIB = "a, b = 0, 1\nfor _ in range(90):\n    a, b = b, a + b\nprint(a)\n"


def call(name: str, n: int, **args: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=name, arguments=json.dumps(args))


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_final", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers with the scripted turns in order, and records the tools and
    input items each call received."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = list(turns)
        self.seen_tools: list[list[Any]] = []
        self.seen_input: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.seen_tools.append(list(tools))
        self.seen_input.append(input)
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the test runs the agent without streaming")


def run_agent(model: ScriptedModel, tools: list[FunctionTool], prompt: str) -> Any:
    agent = Agent(name="coder", instructions="Use the sandbox.", model=model, tools=tools)
    return Runner.run_sync(agent, prompt, run_config=RunConfig(tracing_disabled=True), max_turns=10)


def outputs(model: ScriptedModel) -> dict[str, str]:
    """The function_call_output items of the model's last input, by call id."""
    return {i["call_id"]: i["output"] for i in model.seen_input[-1] if isinstance(i, dict) and i.get("type") == "function_call_output"}


def ok(output: str) -> Any:
    """The JSON a tool answered with, which must not be an error."""
    assert not output.startswith("error:"), output
    return json.loads(output)


def test_tools_are_strict_function_tools(live_sbx: Sandbox) -> None:
    tools = sandbox_tools(live_sbx)
    names = [t.name for t in tools]
    assert names == ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files", "runtime_run_code"], names
    assert all(isinstance(t, FunctionTool) and t.strict_json_schema for t in tools)
    assert [t.name for t in sandbox_tools(live_sbx, run_code=False)] == names[:4]
    exec_tool = tools[0]
    assert exec_tool.description.startswith("Run a shell command in the sandbox"), exec_tool.description
    assert "Args:" not in exec_tool.description
    schema = exec_tool.params_json_schema
    assert schema["additionalProperties"] is False
    assert sorted(schema["properties"]) == ["command", "cwd", "timeout_seconds"]
    # Strict: every argument is required, an optional one as nullable.
    assert sorted(schema["required"]) == ["command", "cwd", "timeout_seconds"]
    assert {"type": "null"} in schema["properties"]["cwd"]["anyOf"]
    assert schema["properties"]["timeout_seconds"]["description"].endswith("None means 120 seconds.")
    t60 = sandbox_tools(live_sbx, timeout_seconds=60)[0]
    assert t60.params_json_schema["properties"]["timeout_seconds"]["description"].endswith("None means 60 seconds.")


def test_scripted_agent_writes_runs_and_reads(live_sbx: Sandbox) -> None:
    model = ScriptedModel([
        [call("runtime_write_file", 1, path="oa/fib.py", content=FIB)],
        [
            call("runtime_exec", 2, command="python3 fib.py", cwd="oa", timeout_seconds=None),
            call("runtime_exec", 3, command="echo oops >&2; exit 3", cwd=None, timeout_seconds=None),
        ],
        [
            call("runtime_read_file", 4, path="oa/fib.py"),
            call("runtime_list_files", 5, path="oa"),
            call("runtime_read_file", 6, path="oa/missing.txt"),
            call("runtime_exec", 7, command="true", cwd=None, timeout_seconds=-1),
        ],
        [say("The 90th Fibonacci number is 2880067194370816120.")],
    ])
    result = run_agent(model, sandbox_tools(live_sbx), "What is the 90th Fibonacci number?")

    assert result.final_output == "The 90th Fibonacci number is 2880067194370816120."
    assert [t.name for t in model.seen_tools[0]][:4] == [
        "runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]
    out = outputs(model)
    assert sorted(out) == [f"call_{i}" for i in range(1, 8)], out
    assert out["call_1"] == f"wrote {len(FIB)} bytes to /workspace/oa/fib.py", out["call_1"]
    assert ok(out["call_2"]) == {"exit_code": 0, "stdout": "2880067194370816120\n", "stderr": "", "timed_out": False}
    assert ok(out["call_3"]) == {"exit_code": 3, "stdout": "", "stderr": "oops\n", "timed_out": False}
    assert out["call_4"] == FIB
    assert ok(out["call_5"]) == [{"name": "fib.py", "type": "file", "size": len(FIB)}]
    # A path that is not there is data the model reads, not an error.
    assert out["call_6"] == "not found: /workspace/oa/missing.txt (no such file or directory)", out["call_6"]
    # A bad argument is the tool's answer, with its words.
    assert out["call_7"] == "error: ValueError: timeout_seconds must be positive", out["call_7"]


def test_exec_timeout_and_output_cap(live_sbx: Sandbox) -> None:
    model = ScriptedModel([
        [
            call("runtime_exec", 1, command="seq 1 10000", cwd=None, timeout_seconds=None),
            call("runtime_exec", 2, command="sleep 30", cwd=None, timeout_seconds=1),
        ],
        [say("done")],
    ])
    run_agent(model, sandbox_tools(live_sbx, output_cap=100), "count")
    out = outputs(model)
    big = ok(out["call_1"])
    assert big["stdout"].startswith("[stdout was cut: only its last 100 characters are shown]\n"), big["stdout"][:200]
    assert big["stdout"].endswith("9999\n10000\n")
    assert ok(out["call_2"])["timed_out"] is True, out["call_2"]


def test_scripted_agent_runs_code_with_state(live_sbx: Sandbox) -> None:
    model = ScriptedModel([
        [call("runtime_run_code", 1, code="y = 6 * 7\nprint('set')", timeout_seconds=None)],
        [call("runtime_run_code", 2, code="y", timeout_seconds=None)],
        [call("runtime_run_code", 3, code="1 / 0", timeout_seconds=None)],
        [say("42")],
    ])
    result = run_agent(model, sandbox_tools(live_sbx), "What is six times seven?")
    assert result.final_output == "42"
    out = outputs(model)
    assert ok(out["call_1"]) == {"results": [], "stdout": "set\n", "stderr": "", "error": None}, out["call_1"]
    assert ok(out["call_2"])["results"] == ["42"], out["call_2"]
    err = ok(out["call_3"])["error"]
    assert err["name"] == "ZeroDivisionError", out["call_3"]
    assert "division by zero" in err["value"]
    assert "ZeroDivisionError" in err["traceback"]


def test_run_code_timeout_keeps_the_kernel(live_sbx: Sandbox) -> None:
    model = ScriptedModel([
        [call("runtime_run_code", 1, code="kept = 'still here'", timeout_seconds=None)],
        [call("runtime_run_code", 2, code="while True: pass", timeout_seconds=2)],
        [call("runtime_run_code", 3, code="kept", timeout_seconds=None)],
        [say("done")],
    ])
    run_agent(model, sandbox_tools(live_sbx), "loop")
    out = outputs(model)
    stopped = ok(out["call_2"])["error"]
    assert stopped["name"] == "TimeoutError", out["call_2"]
    assert "keeps its state" in stopped["value"], stopped
    assert ok(out["call_3"])["results"] == ["'still here'"], out["call_3"]
