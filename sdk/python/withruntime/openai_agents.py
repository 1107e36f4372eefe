"""OpenAI Agents SDK tools over a sandbox: ``sandbox_tools(sbx)``.

    from agents import Agent, Runner
    from withruntime.openai_agents import sandbox_tools
    agent = Agent(name="coder", tools=sandbox_tools(sbx))
    Runner.run_sync(agent, "...")

The tools are ``runtime_exec``, ``runtime_read_file``, ``runtime_write_file``,
``runtime_list_files`` and ``runtime_run_code``: the functions of
:mod:`withruntime.tools` made into ``agents.FunctionTool`` objects with a
strict JSON schema (optional arguments are required but nullable, null
meaning the default), so names, argument descriptions, results, caps and
timeouts are the same. A dict or list result reaches the model as JSON. The
SDK runs the functions in a worker thread, so they do not block the event
loop. A failure of the platform (``withruntime.Error``) or a bad argument
becomes the tool's answer, as ``error: <Type>: <message>``, so the model can
act on it (the SDK's default would hide the reason).

Needs ``openai-agents``, the ``openai-agents`` extra (``withruntime sdk python --extra
openai-agents`` prints its install); importing ``withruntime`` alone does not
import it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, List

from agents import FunctionTool, RunContextWrapper, function_tool

from ._adapters import as_text, tool_functions
from .tools import OUTPUT_CAP, TIMEOUT_SECONDS

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["sandbox_tools", "as_function_tool"]


def _say_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
    # The tools' exceptions carry the platform's stable code and message and
    # never a secret: the model is better off reading them.
    return f"error: {type(error).__name__}: {error}"


def as_function_tool(fn: Callable[..., Any]) -> FunctionTool:
    """One of withruntime.tools' functions as a strict FunctionTool."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        out = fn(*args, **kwargs)
        # A dict with a "type" key would otherwise be taken for one of the
        # SDK's structured outputs (text, image, file).
        return as_text(out)

    return function_tool(call, name_override=fn.__name__, failure_error_function=_say_error, strict_mode=True)


def sandbox_tools(
    sbx: "Sandbox",
    *,
    timeout_seconds: int | None = TIMEOUT_SECONDS,
    output_cap: int = OUTPUT_CAP,
    run_code: bool = True,
) -> List[FunctionTool]:
    """The agent tools bound to one sandbox, as OpenAI Agents FunctionTools.

    ``timeout_seconds`` and ``output_cap`` are those of
    withruntime.tools.sandbox_tools. ``run_code=False`` leaves out
    ``runtime_run_code``, giving the four shell and file tools only.
    """
    fns = tool_functions(sbx, timeout_seconds=timeout_seconds, output_cap=output_cap, run_code=run_code)
    return [as_function_tool(f) for f in fns]
