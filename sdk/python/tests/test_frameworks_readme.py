"""The README's "Frameworks" snippets, run as written against a real server
(marked `live`). Where a snippet asks a model service, the framework's
model lookup is replaced by a scripted model (no network); the snippet's
text is untouched. Each test skips when its framework is not installed
(scripts/pyenv.sh's environment has them all).

Keep each snippet identical to its README block.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

SMOLAGENTS_TOOLS = textwrap.dedent('''\
    from smolagents import tool
    from withruntime import Sandbox
    from withruntime.tools import code_tools, sandbox_tools

    with Sandbox.create(timeout_seconds=600) as sbx:
        run, read, write, ls, code = (tool(f) for f in sandbox_tools(sbx) + code_tools(sbx))
        print(run(command="python3 -c 'print(6 * 7)'"))  # {'exit_code': 0, 'stdout': '42\\n', 'stderr': '', 'timed_out': False}
        print(code(code="x = 6 * 7\\nx"))                 # {'results': ['42'], 'stdout': '', 'stderr': '', 'error': None}
''')

LANGCHAIN = textwrap.dedent('''\
    from withruntime import Sandbox
    from withruntime.langchain import sandbox_tools

    with Sandbox.create(timeout_seconds=600) as sbx:
        tools = sandbox_tools(sbx)  # LangChain StructuredTools; give them to model.bind_tools(tools) or an agent
        print([t.name for t in tools])
        print(tools[0].invoke({"command": "python3 -c 'print(6 * 7)'"}))  # {"exit_code": 0, "stdout": "42\\n", ...}
''')

OPENAI_AGENTS = textwrap.dedent('''\
    from agents import Agent, Runner
    from withruntime import Sandbox
    from withruntime.openai_agents import sandbox_tools

    with Sandbox.create(timeout_seconds=600) as sbx:
        agent = Agent(name="coder", instructions="Answer by running code in the sandbox.", tools=sandbox_tools(sbx))
        result = Runner.run_sync(agent, "What is 6 * 7? Compute it in the sandbox.")
        print(result.final_output)  # 42
''')

FIVE = ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files", "runtime_run_code"]


def run_snippet(snippet: str) -> None:
    exec(compile(snippet, "README.md", "exec"), {"__name__": "__readme__"})


def test_smolagents_tools_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("smolagents", reason="smolagents is not installed: run the tests in scripts/pyenv.sh's environment")
    run_snippet(SMOLAGENTS_TOOLS)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "{'exit_code': 0, 'stdout': '42\\n', 'stderr': '', 'timed_out': False}",
        "{'results': ['42'], 'stdout': '', 'stderr': '', 'error': None}",
    ], lines


def test_langchain_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langchain_core", reason="langchain-core is not installed: run the tests in scripts/pyenv.sh's environment")
    run_snippet(LANGCHAIN)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(FIVE), lines
    assert json.loads(lines[1]) == {"exit_code": 0, "stdout": "42\n", "stderr": "", "timed_out": False}, lines


def test_openai_agents_snippet(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agents", reason="openai-agents is not installed: run the tests in scripts/pyenv.sh's environment")
    import agents
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.models.multi_provider import MultiProvider
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        """Calls runtime_exec, then answers with the stdout it was fed back."""

        def __init__(self) -> None:
            self.tools: list[str] = []

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *a: Any, **k: Any) -> ModelResponse:
            self.tools = [t.name for t in tools]
            fed = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if not fed:
                out: Any = ResponseFunctionToolCall(
                    type="function_call", id="fc_1", call_id="call_1", name="runtime_exec",
                    arguments=json.dumps({"command": "python3 -c 'print(6 * 7)'", "cwd": None, "timeout_seconds": None}),
                )
            else:
                answer = json.loads(fed[-1]["output"])["stdout"].strip()
                out = ResponseOutputMessage(
                    id="msg_1", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text=answer, annotations=[])],
                )
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    model = Scripted()
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)
    agents.set_tracing_disabled(True)
    try:
        run_snippet(OPENAI_AGENTS)
    finally:
        agents.set_tracing_disabled(False)
    assert model.tools == FIVE
    assert capsys.readouterr().out == "42\n"
