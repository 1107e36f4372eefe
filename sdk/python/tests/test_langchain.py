"""withruntime.langchain against a real server and sandbox (marked `live`):
a scripted LangChain chat model calls the tools in a tool-calling loop,
and the test checks what LangChain fed back to the model.

Needs langchain-core (scripts/pyenv.sh installs it); skipped without it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="langchain-core is not installed: run the tests in scripts/pyenv.sh's environment")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from withruntime import Sandbox  # noqa: E402
from withruntime.langchain import sandbox_tools  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

FIB = "a, b = 0, 1\nfor _ in range(90):\n    a, b = b, a + b\nprint(a)\n"


class ScriptedChatModel(FakeMessagesListChatModel):
    """Answers with the scripted messages in turn, and records the tools
    bound to it (as a real chat model sends them to its API) and the
    messages each call received."""

    seen_tools: list = []
    seen_messages: list = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen_tools.append(kwargs.get("tools"))
        self.seen_messages.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def call(name: str, n: int, **args: Any) -> dict:
    return {"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}


def run_agent(model: ScriptedChatModel, tools: list[StructuredTool], prompt: str) -> list[BaseMessage]:
    """LangChain's tool-calling loop: the model answers, each tool call runs
    and its ToolMessage goes back, until an answer has no tool calls."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    messages: list[BaseMessage] = [HumanMessage(prompt)]
    for _ in range(10):
        ai = bound.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            return messages
        for tc in ai.tool_calls:
            messages.append(by_name[tc["name"]].invoke(tc))
    raise AssertionError("the scripted agent did not finish")


def tool_messages(messages: list[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def ok(m: ToolMessage) -> Any:
    """The JSON a tool answered with, which must not be an error."""
    assert m.status == "success", m.content
    return json.loads(m.content)


def test_tools_are_structured_tools_with_the_plain_schemas(live_sbx: Sandbox) -> None:
    tools = sandbox_tools(live_sbx)
    names = [t.name for t in tools]
    assert names == ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files", "runtime_run_code"], names
    assert all(isinstance(t, StructuredTool) for t in tools)
    assert [t.name for t in sandbox_tools(live_sbx, run_code=False)] == names[:4]
    fn = convert_to_openai_tool(tools[0])["function"]
    assert fn["name"] == "runtime_exec"
    assert fn["description"].startswith("Run a shell command in the sandbox"), fn["description"]
    assert "Args:" not in fn["description"]
    props = fn["parameters"]["properties"]
    assert sorted(props) == ["command", "cwd", "timeout_seconds"], props
    assert fn["parameters"]["required"] == ["command"]
    assert props["timeout_seconds"]["description"].endswith("None means 120 seconds.")
    # The binding's default timeout reaches the description the model reads.
    fn60 = convert_to_openai_tool(sandbox_tools(live_sbx, timeout_seconds=60)[0])["function"]
    assert fn60["parameters"]["properties"]["timeout_seconds"]["description"].endswith("None means 60 seconds.")


def test_scripted_agent_writes_runs_and_reads(live_sbx: Sandbox) -> None:
    model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[call("runtime_write_file", 1, path="lc/fib.py", content=FIB)]),
        AIMessage("", tool_calls=[
            call("runtime_exec", 2, command="python3 fib.py", cwd="lc"),
            call("runtime_exec", 3, command="echo oops >&2; exit 3", cwd=None, timeout_seconds=None),
        ]),
        AIMessage("", tool_calls=[
            call("runtime_read_file", 4, path="lc/fib.py"),
            call("runtime_list_files", 5, path="lc"),
            call("runtime_read_file", 6, path="lc/missing.txt"),
            call("runtime_exec", 7, command="true", cwd=None, timeout_seconds=-1),
        ]),
        AIMessage("The 90th Fibonacci number is 2880067194370816120."),
    ])
    messages = run_agent(model, sandbox_tools(live_sbx), "What is the 90th Fibonacci number?")

    assert messages[-1].content == "The 90th Fibonacci number is 2880067194370816120."
    # The model was offered the five tools, as a chat model's API receives them.
    assert [t["function"]["name"] for t in model.seen_tools[0]][:4] == [
        "runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]
    out = tool_messages(messages)
    assert out["call_1"].content == f"wrote {len(FIB)} bytes to /workspace/lc/fib.py", out["call_1"].content
    assert json.loads(out["call_2"].content) == {
        "exit_code": 0, "stdout": "2880067194370816120\n", "stderr": "", "timed_out": False}
    assert json.loads(out["call_3"].content) == {"exit_code": 3, "stdout": "", "stderr": "oops\n", "timed_out": False}
    assert out["call_3"].status == "success"  # a failed command is data, not a tool error
    assert out["call_4"].content == FIB
    assert json.loads(out["call_5"].content) == [{"name": "fib.py", "type": "file", "size": len(FIB)}]
    # A path that is not there is data the model reads, not an error.
    assert out["call_6"].status == "success"
    assert out["call_6"].content == "not found: /workspace/lc/missing.txt (no such file or directory)", out["call_6"].content
    # A bad argument is the tool's answer, marked as an error, with its words.
    assert out["call_7"].status == "error"
    assert "timeout_seconds must be positive" in out["call_7"].content, out["call_7"].content
    # Each tool result went back to the model in the next call.
    last_seen = model.seen_messages[-1]
    assert [m.tool_call_id for m in last_seen if isinstance(m, ToolMessage)] == [f"call_{i}" for i in range(1, 8)]


def test_exec_timeout_and_output_cap(live_sbx: Sandbox) -> None:
    run = sandbox_tools(live_sbx, output_cap=100)[0]
    big = json.loads(run.invoke({"command": "seq 1 10000"}))
    assert big["stdout"].startswith("[stdout was cut: only its last 100 characters are shown]\n"), big["stdout"][:200]
    assert big["stdout"].endswith("9999\n10000\n")
    slow = json.loads(run.invoke({"command": "sleep 30", "timeout_seconds": 1}))
    assert slow["timed_out"] is True, slow


def test_scripted_agent_runs_code_with_state(live_sbx: Sandbox) -> None:
    model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[call("runtime_run_code", 1, code="x = 6 * 7\nprint('set')")]),
        AIMessage("", tool_calls=[call("runtime_run_code", 2, code="x")]),
        AIMessage("", tool_calls=[call("runtime_run_code", 3, code="1 / 0")]),
        AIMessage("", tool_calls=[call("runtime_run_code", 4, code="from IPython.display import HTML, display\ndisplay(HTML('<b>hi</b>'))")]),
        AIMessage("42"),
    ])
    out = tool_messages(run_agent(model, sandbox_tools(live_sbx), "What is six times seven?"))
    first = ok(out["call_1"])
    assert first == {"results": [], "stdout": "set\n", "stderr": "", "error": None}, first
    assert ok(out["call_2"])["results"] == ["42"]
    err = ok(out["call_3"])["error"]
    assert err["name"] == "ZeroDivisionError", err
    assert "division by zero" in err["value"]
    assert "ZeroDivisionError" in err["traceback"]
    # A rich result says which formats it has besides its text.
    shown = ok(out["call_4"])["results"]
    assert len(shown) == 1 and shown[0].endswith("[also as html]"), shown
