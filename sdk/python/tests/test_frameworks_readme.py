"""The README's "Frameworks" snippets, run as written against a real server
(marked `live`). Where a snippet asks a model service, the framework's
model lookup is replaced by a scripted model (no network); the snippet's
text is untouched. Each test skips when its framework is not installed
(scripts/pyenv.sh's environment has them all).

The snippets are read from README.md itself (tests/readme.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import readme

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

SMOLAGENTS_TOOLS, LANGCHAIN, OPENAI_AGENTS = readme.blocks("Frameworks")

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
