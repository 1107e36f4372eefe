"""Runs one Python example of a README, as readme_test.go asks.

usage: run_example.py FILE LABEL [--standin] [--given NAME]...

FILE holds the example's code; LABEL (README.md:123) names it in
tracebacks. --given sbx makes the sandbox the example calls `sbx` (small,
stopped afterwards). --standin replaces the model services an example asks
for with scripted stand-ins, so that it needs no network: smolagents'
InferenceClientModel becomes the scripted CodeAgent model of the SDK's own
tests (sdk/python/tests/scripted_smolagents.py), and the OpenAI Agents SDK's
default model one that calls runtime_exec and answers with what it printed.
Each stand-in does its work through the SDK and a real sandbox; only the
model's choices are scripted.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# The 20th Fibonacci number, computed in the sandbox: what the README's
# agent examples ask a model for.
FIB_CODE = "a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a)"
FIB_COMMAND = "python3 -c '" + FIB_CODE + "'"


def install_standins() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "sdk", "python", "tests"))
    try:
        import smolagents
    except ImportError:
        pass
    else:
        from scripted_smolagents import ScriptedModel

        smolagents.InferenceClientModel = lambda *a, **k: ScriptedModel([FIB_CODE, "final_answer(a)"])  # type: ignore[misc]
    try:
        import agents
    except ImportError:
        return
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.models.multi_provider import MultiProvider
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        """Calls runtime_exec with the Fibonacci program, then answers with
        the stdout the tool gave back."""

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *a: Any, **k: Any) -> ModelResponse:
            fed = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"] if isinstance(input, list) else []
            if not fed:
                if "runtime_exec" not in [t.name for t in tools]:
                    raise AssertionError(f"the agent has no runtime_exec tool: {[t.name for t in tools]}")
                out: Any = ResponseFunctionToolCall(
                    type="function_call", id="fc_1", call_id="call_1", name="runtime_exec",
                    arguments=json.dumps({"command": FIB_COMMAND, "cwd": None, "timeout_seconds": None}),
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

    MultiProvider.get_model = lambda self, name: Scripted()  # type: ignore[method-assign]
    agents.set_tracing_disabled(True)


def main() -> None:
    args = sys.argv[1:]
    path, label = args[0], args[1]
    standin = "--standin" in args
    given = [args[i + 1] for i, a in enumerate(args) if a == "--given"]
    if standin:
        install_standins()
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), label, "exec")
    ns: dict[str, Any] = {"__name__": "__main__"}
    sbx = None
    if "sbx" in given:
        from withruntime import Sandbox

        sbx = Sandbox.create(vcpus=1, memory_mib=1024, timeout_seconds=600, metadata={"test": "readme"})
        ns["sbx"] = sbx
    try:
        exec(code, ns)
    finally:
        if sbx is not None:
            sbx.stop()


if __name__ == "__main__":
    main()
