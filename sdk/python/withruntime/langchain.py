"""LangChain tools over a sandbox: ``sandbox_tools(sbx)``.

    from withruntime.langchain import sandbox_tools
    tools = sandbox_tools(sbx)          # five langchain_core StructuredTools
    model = chat_model.bind_tools(tools)

The tools are ``runtime_exec``, ``runtime_read_file``, ``runtime_write_file``,
``runtime_list_files`` and ``runtime_run_code``: the functions of
:mod:`withruntime.tools`, wrapped as they are, so names, argument schemas
(with each argument's description), results, caps and timeouts are the
same. A dict or list result reaches the model as JSON text. A failure
of the platform (``withruntime.Error``) or a bad argument (``ValueError``)
becomes the tool's answer, marked as an error, so the model can act on it
instead of the agent loop ending.

Needs ``langchain-core``, the ``langchain`` extra (``withruntime sdk python --extra
langchain`` prints its install); importing ``withruntime`` alone does not
import it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, List

from langchain_core.tools import StructuredTool, ToolException

from ._adapters import as_text, tool_functions
from .errors import Error
from .tools import OUTPUT_CAP, TIMEOUT_SECONDS

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["sandbox_tools", "as_langchain_tool"]


def as_langchain_tool(fn: Callable[..., Any]) -> StructuredTool:
    """One of withruntime.tools' functions as a StructuredTool: its name, its
    docstring's description and per-argument descriptions, its type hints."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        try:
            out = fn(*args, **kwargs)
        except (Error, ValueError) as e:
            raise ToolException(f"{type(e).__name__}: {e}") from e
        # LangChain would pass a list of dicts with a "type" key (a listing's
        # entries) on as content blocks of that type.
        return as_text(out)

    return StructuredTool.from_function(
        call,
        name=fn.__name__,
        parse_docstring=True,
        error_on_invalid_docstring=True,
        handle_tool_error=True,
    )


def sandbox_tools(
    sbx: "Sandbox",
    *,
    timeout_seconds: int | None = TIMEOUT_SECONDS,
    output_cap: int = OUTPUT_CAP,
    run_code: bool = True,
) -> List[StructuredTool]:
    """The agent tools bound to one sandbox, as LangChain StructuredTools.

    ``timeout_seconds`` and ``output_cap`` are those of
    withruntime.tools.sandbox_tools. ``run_code=False`` leaves out
    ``runtime_run_code``, giving the four shell and file tools only.
    """
    fns = tool_functions(sbx, timeout_seconds=timeout_seconds, output_cap=output_cap, run_code=run_code)
    return [as_langchain_tool(f) for f in fns]
