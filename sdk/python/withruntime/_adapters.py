"""What the framework adapters (withruntime.langchain, .openai_agents) share:
which of withruntime.tools' functions an agent gets, and how a result
reaches the model. Imports no framework."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, List

from .tools import code_tools
from .tools import sandbox_tools as _plain_tools

if TYPE_CHECKING:
    from .sandbox import Sandbox


def tool_functions(
    sbx: "Sandbox", *, timeout_seconds: int | None, output_cap: int, run_code: bool
) -> List[Callable[..., Any]]:
    """withruntime.tools' functions bound to sbx: the four shell and file
    tools, and ``runtime_run_code`` unless run_code is false."""
    fns = _plain_tools(sbx, timeout_seconds=timeout_seconds, output_cap=output_cap)
    if run_code:
        fns += code_tools(sbx, timeout_seconds=timeout_seconds, output_cap=output_cap)
    return fns


def as_text(out: Any) -> str:
    """A tool's result as the model gets it: a string as it is, anything
    else as JSON. Frameworks take some dicts and lists for structured
    content of their own (a "type" key, say): JSON is unambiguous."""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
