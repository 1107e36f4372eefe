"""Agent tools over a sandbox: ``sandbox_tools(sbx)`` and ``code_tools(sbx)``.

``sandbox_tools`` returns four plain functions, in this order:
``runtime_exec``, ``runtime_read_file``, ``runtime_write_file``,
``runtime_list_files``. ``code_tools`` returns one more, ``runtime_run_code``
(Python in the sandbox's persistent kernel, ``sbx.run_code``), for agents
whose tools are their only way to run code. smolagents' ``tool`` wraps each
as it is::

    from smolagents import tool
    tools = [tool(f) for f in sandbox_tools(sbx)]

and each is callable directly. The LangChain, OpenAI Agents and MCP
adapters are built from these same functions. They follow smolagents' rules for tool
functions: nested ``def`` closures whose source ``inspect.getsource`` reads;
a description before ``Args:``; every parameter documented on one line as
``name: text``; type hints from str, int, bool, list, dict and ``X | None``;
``None`` for an optional argument means its default (and a
``timeout_seconds`` of 0 too, as the MCP tools and the Go client take it:
never "no limit"); safe to call from
parallel threads (they share nothing but the thread-safe sandbox client);
and what they return is capped (the last 20,000 characters of stdout and of
stderr, the first 20,000 bytes of a file, 400 directory entries, the first
20,000 characters of run_code's results), with a
note saying what was cut, because the model receives ``str(result)`` whole.

Failures: ``runtime_exec`` returns a non-zero exit code or a timeout as
data, never as an exception, and ``runtime_run_code`` an exception in the
code (or a cell interrupted at its timeout) as its ``error``, so the model sees a failed command as a
failure it can act on. A path that is not there is data too:
``runtime_read_file`` returns ``"not found: /workspace/x (no such file or
directory)"`` and ``runtime_list_files`` one entry of type ``note`` whose
name says the same, so the model reads it and tries another path. A failure
of the platform itself (sandbox gone, lease ended, server unreachable)
raises the SDK's exception (``withruntime.APIError`` / ``TransportError``);
agent frameworks such as smolagents show that error to the model as the
tool's answer, and programs calling the functions directly get a normal
exception.

The ``runtime_*`` functions' docstrings (what a model reads of each tool)
are generated from api/tools.json, the text the MCP server and the
TypeScript tools are made from too, by sdk/python/scripts/gen_tools.py:
edit that file and run the script, not the docstrings here; a test fails
when they differ.

This module deliberately does not use ``from __future__ import annotations``:
frameworks read the functions' type hints with ``typing.get_type_hints``.
"""

import posixpath
import re
from typing import TYPE_CHECKING, Any, Callable, List

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["sandbox_tools", "code_tools", "OUTPUT_CAP", "LIST_CAP", "TIMEOUT_SECONDS"]

# Characters of stdout and of stderr (and bytes of a file) a tool returns.
OUTPUT_CAP = 20_000
# Directory entries runtime_list_files returns.
LIST_CAP = 400
# Seconds runtime_exec gives a command when the model gives none: a server
# started in the foreground then costs the agent two minutes, not the lease.
TIMEOUT_SECONDS = 120

# The formats of a rich result other than text, as runtime_run_code names them.
_RICH_FORMATS = ("html", "markdown", "svg", "png", "jpeg", "latex", "javascript", "json")

_UNSET: Any = object()


def _check_timeout(timeout_seconds: int | None, default_timeout_seconds: Any) -> int | None:
    default_timeout = timeout_seconds if default_timeout_seconds is _UNSET else default_timeout_seconds
    if default_timeout is not None and default_timeout <= 0:
        raise ValueError("timeout_seconds must be positive or None")
    return default_timeout


def _say_default_timeout(fn: Callable[..., Any], default_timeout: int | None) -> None:
    """Rewrites the timeout line of fn's docstring for a default other than 120 s."""
    if default_timeout == TIMEOUT_SECONDS:
        return
    said = "no limit but the sandbox's lease" if default_timeout is None else f"{int(default_timeout)} seconds"
    fn.__doc__ = (fn.__doc__ or "").replace("None means 120 seconds.", f"None means {said}.")


def _keep_tail(text: str, already_cut: bool, cap: int, stream: str) -> str:
    if len(text) <= cap and not already_cut:
        return text
    kept = text[-cap:] if cap > 0 else ""
    return f"[{stream} was cut: only its last {len(kept)} characters are shown]\n{kept}"


def _not_found(sbx: "Sandbox", path: str, err: Exception) -> Any:
    """The tool's answer when err says that path is not there, or None when
    err is another failure. The API answers not_found (an APIError, told by
    its code: this module imports nothing of the package, see
    _kernel_sandbox) for a missing sandbox too: the sandbox is asked for,
    and only while it is there and not ended was it the path that was
    missing. Inside the sandbox (KernelSandbox) the error is the system
    call's own."""
    if isinstance(err, (FileNotFoundError, NotADirectoryError)):
        pass
    elif getattr(err, "code", None) == "not_found" and hasattr(sbx, "info"):
        try:
            if sbx.info().state == "ended":
                return None
        except Exception:  # noqa: BLE001 - the sandbox is not there: the first error stands
            return None
    else:
        return None
    resolve = getattr(sbx.files, "abs", None)  # KernelSandbox's workspace may be elsewhere
    where = resolve(path) if callable(resolve) else posixpath.normpath(posixpath.join("/workspace", path or "."))
    return f"not found: {where} (no such file or directory)"


def sandbox_tools(
    sbx: "Sandbox",
    *,
    timeout_seconds: int | None = TIMEOUT_SECONDS,
    output_cap: int = OUTPUT_CAP,
    default_timeout_seconds: int | None = _UNSET,
) -> List[Callable[..., Any]]:
    """The four agent tools bound to one sandbox.

    ``sbx`` is a withruntime.Sandbox. ``timeout_seconds`` is the command
    timeout runtime_exec uses when the model gives none or 0 (default 120;
    None: only the lease bounds a command), and runtime_exec's description
    tells the model which applies. ``default_timeout_seconds`` is its older name
    and wins when given. ``output_cap`` bounds what each tool returns (see
    the module doc). The model never sees the API key: the tools hold the
    sandbox, the model only chooses commands and paths.
    """
    cap = int(output_cap)
    default_timeout = _check_timeout(timeout_seconds, default_timeout_seconds)

    def runtime_exec(command: str, cwd: str | None = None, timeout_seconds: int | None = None) -> dict:
        """Run a shell command in the sandbox, a Linux machine with Python 3, pip, git and curl, and return its exit code, stdout, stderr and whether it timed out.

        Files, installed packages and started servers persist between calls. A failing command is reported through a non-zero exit_code, not as a failed call. Long output keeps only its end. The call waits for the command to end, so a command that does not end by itself (a server, a watcher) is killed at its timeout and returns timed_out True; start such a command in the background instead, for example "nohup python3 -m http.server 8000 > server.log 2>&1 &", then read server.log or query it in later calls. A timeout_seconds of 0 is the same as None.

        Args:
            command: The shell command to run, for example "python3 main.py" or "pip install requests".
            cwd: The directory to run in, absolute or relative to /workspace; None means /workspace.
            timeout_seconds: Seconds after which the command is killed; None means 120 seconds.
        """
        timeout = timeout_seconds if timeout_seconds else default_timeout
        if timeout is not None and timeout < 0:
            raise ValueError("timeout_seconds must be positive")
        result = sbx.exec(command, cwd=cwd or None, timeout_ms=int(timeout * 1000) if timeout else None)
        return {
            "exit_code": result.exit_code,
            "stdout": _keep_tail(result.stdout, result.stdout_truncated, cap, "stdout"),
            "stderr": _keep_tail(result.stderr, result.stderr_truncated, cap, "stderr"),
            "timed_out": result.timed_out,
        }

    _say_default_timeout(runtime_exec, default_timeout)

    def runtime_read_file(path: str) -> str:
        """Read a text file in the sandbox and return its content.

        A long file is cut after its first 20000 bytes, with a note saying so; use runtime_exec with head, tail or sed to read other parts. A binary file gives a note instead of its bytes, and a file that is not there gives "not found: PATH (no such file or directory)" as its content.

        Args:
            path: The file to read, absolute or relative to /workspace.
        """
        try:
            data, total = sbx.files._read_head(path, cap)
        except Exception as e:  # noqa: BLE001 - all but a missing path raised again
            missing = _not_found(sbx, path, e)
            if missing is None:
                raise
            return missing
        if b"\0" in data[:8192]:
            size = "unknown size" if total is None else f"{total} bytes"
            return f"[{path} is a binary file ({size}); use runtime_exec with file, xxd or python3 to inspect it]"
        text = data.decode("utf-8", "replace")
        if total is None or total > len(data):
            size = "more" if total is None else f"{total} bytes in all"
            text += f"\n[cut: only the first {len(data)} bytes of {path} are shown ({size}); use runtime_exec with tail or sed -n to read the rest]"
        return text

    def runtime_write_file(path: str, content: str) -> str:
        """Write a text file in the sandbox, replacing it if it exists and making its parent directories, and say what was written.

        Args:
            path: The file to write, absolute or relative to /workspace.
            content: The whole new content of the file.
        """
        info = sbx.files.write(path, content)
        size = len(content.encode("utf-8"))
        return f"wrote {size} bytes to {info.path or path}"

    def runtime_list_files(path: str | None = None) -> list:
        """List a directory in the sandbox, one entry per file with its name, its type (file, dir, symlink or other) and its size in bytes.

        Entries are sorted by name; past 400 of them an entry of type note says how many more there are. A directory that is not there gives one entry of type note whose name is "not found: PATH (no such file or directory)".

        Args:
            path: The directory to list, absolute or relative to /workspace; None means /workspace.
        """
        try:
            entries = sorted(sbx.files.list(path or "."), key=lambda e: e.name)
        except Exception as e:  # noqa: BLE001 - all but a missing path raised again
            missing = _not_found(sbx, path or ".", e)
            if missing is None:
                raise
            return [{"name": missing, "type": "note", "size": 0}]
        out = [{"name": e.name, "type": e.type, "size": e.size} for e in entries[:LIST_CAP]]
        if len(entries) > LIST_CAP:
            more = len(entries) - LIST_CAP
            out.append({"name": f"[{more} more entries not shown]", "type": "note", "size": 0})
        return out

    return [runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files]


def code_tools(
    sbx: "Sandbox",
    *,
    timeout_seconds: int | None = TIMEOUT_SECONDS,
    output_cap: int = OUTPUT_CAP,
) -> List[Callable[..., Any]]:
    """The code tool bound to one sandbox: ``[runtime_run_code]``.

    ``runtime_run_code`` runs Python in the sandbox's default code context
    (``sbx.run_code``), so state persists between its calls and is shared
    with other callers of that context, not with ``runtime_exec``'s shell.
    ``timeout_seconds`` and ``output_cap`` mean what they mean for
    ``sandbox_tools``; the function follows the same rules (see the module
    doc).
    """
    cap = int(output_cap)
    default_timeout = _check_timeout(timeout_seconds, _UNSET)

    def runtime_run_code(code: str, timeout_seconds: int | None = None) -> dict:
        """Run Python code in the sandbox like a notebook cell, in a persistent IPython kernel, and return its results, stdout, stderr and error.

        Variables, imports and functions stay defined between calls. The value of the last expression comes back in results as text, and so do displayed objects and matplotlib figures, each saying in which other formats (png, html and so on) it exists. Lines such as "!ls" or "%pip install requests" work as in a notebook. An exception in the code is returned in error with its name, value and traceback, not as a failed call; a cell still running at its timeout is interrupted with the error name TimeoutError and the kernel keeps its state; a timeout_seconds of 0 is the same as None. Long output keeps only its end.

        Args:
            code: The Python code to run, for example "import pandas as pd" followed by lines that use it.
            timeout_seconds: Seconds after which the cell is interrupted; None means 120 seconds.
        """
        timeout = timeout_seconds if timeout_seconds else default_timeout
        if timeout is not None and timeout < 0:
            raise ValueError("timeout_seconds must be positive")
        run = sbx.run_code(code, timeout_ms=int(timeout * 1000) if timeout else None)
        results, budget = [], cap
        for i, r in enumerate(run.results):
            if budget <= 0:
                results.append(f"[{len(run.results) - i} more results not shown]")
                break
            text = r.text or ""
            if len(text) > budget:
                text = text[:budget] + f"\n[result cut: only its first {budget} of {len(text)} characters are shown]"
            budget -= len(text)
            formats = [f for f in _RICH_FORMATS if getattr(r, f, None) not in (None, "")]
            if formats:
                text += ("\n" if text else "") + f"[also as {', '.join(formats)}]"
            results.append(text)
        error = None
        if run.error is not None:
            error = {
                "name": run.error.name,
                "value": _in_seconds(run.error.value) if run.error.name == "TimeoutError" else run.error.value,
                "traceback": _keep_tail(run.error.traceback or "", False, cap, "traceback"),
            }
        return {
            "results": results,
            "stdout": _keep_tail("".join(run.logs.stdout), False, cap, "stdout"),
            "stderr": _keep_tail("".join(run.logs.stderr), False, cap, "stderr"),
            "error": error,
        }

    _say_default_timeout(runtime_run_code, default_timeout)
    return [runtime_run_code]


def _in_seconds(value: Any) -> Any:
    """The kernel's timeout message in the tool's own terms: the model
    passed timeout_seconds, not the API's timeout_ms."""
    if not isinstance(value, str):
        return value
    return re.sub(r"\btimeout_ms=(\d+)", lambda m: f"timeout_seconds={int(m.group(1)) / 1000:g}", value)
