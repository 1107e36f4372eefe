"""The code interpreter: cells run in a persistent Python kernel in the sandbox.

``sbx.run_code(code)`` returns an :class:`Execution`: the cell's rich
results (its value and what it displayed), its stdout and stderr, and the
exception it raised, if any, as data. ``sbx.contexts`` makes, lists,
restarts and removes kernels: each context keeps its own state.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Union

from ._stream import events, timeout_ms_of
from .errors import TransportError

if TYPE_CHECKING:
    from ._transport import Transport

__all__ = ["Execution", "Result", "Logs", "ExecutionError", "Context", "Contexts"]

# The events that end a code stream ("error" raises before it is seen).
_CODE_END = frozenset({"end"})

# The server cuts a code stream at a line over 8 MiB; a longer one is a
# server gone wrong, refused before it fills the memory.
_MAX_LINE = 9 * 1024 * 1024

# How long past its timeout_ms a cell's stream may stay silent, in seconds.
_READ_SLACK = 120.0

# The MIME fields of a result, in the order a reader is shown them.
_FORMATS = ("text", "html", "markdown", "svg", "png", "jpeg", "latex", "javascript", "json")


@dataclass
class Result:
    """One rich result of a cell: its value (``is_main_result``) or something
    it displayed (``display()``, a matplotlib figure).

    Each field is one representation of it, None when absent: ``text``
    (text/plain), ``html``, ``markdown``, ``svg``, ``png`` and ``jpeg``
    (base64), ``latex``, ``javascript``, and ``json`` (application/json,
    decoded). A representation over 4 MiB is dropped and ``text`` says so.
    """

    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    latex: str | None = None
    javascript: str | None = None
    json: Any = None
    is_main_result: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Result:
        def s(name: str) -> str | None:
            # A representation that is not text is dropped, as TypeScript does.
            v = d.get(name)
            return v if isinstance(v, str) and v != "" else None

        return cls(
            text=s("text"),
            html=s("html"),
            markdown=s("markdown"),
            svg=s("svg"),
            png=s("png"),
            jpeg=s("jpeg"),
            latex=s("latex"),
            javascript=s("javascript"),
            json=d.get("json"),
            is_main_result=bool(d.get("is_main_result")),
        )

    def formats(self) -> List[str]:
        """The representations this result has, e.g. ``["text", "png"]``."""
        return [f for f in _FORMATS if getattr(self, f) is not None]

    def __str__(self) -> str:
        return self.text or ""

    def __repr__(self) -> str:
        # Images are base64 of many kilobytes: name them, do not print them.
        parts = [f"text={_short(self.text)!r}"] if self.text is not None else []
        parts.append(f"formats={self.formats()!r}")
        if self.is_main_result:
            parts.append("is_main_result=True")
        return f"Result({', '.join(parts)})"


@dataclass
class Logs:
    """What a cell wrote, in chunks as they arrived (join them for the whole)."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    """The exception a cell raised: ``name`` (``ValueError``, ...), ``value``
    (its message) and ``traceback`` (plain text). ``TimeoutError`` is a cell
    stopped by ``timeout_ms`` (the context keeps its state);
    ``DeadKernelError`` a kernel that died and was restarted (state lost)."""

    name: str
    value: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.value}"


@dataclass
class Execution:
    """The outcome of one cell.

    ``results`` are its rich results in order (the value and displays),
    ``logs`` its stdout and stderr, ``error`` the exception it raised or
    None, ``execution_count`` the kernel's cell number. ``text`` is the
    value's text (None when the cell's last line was not an expression).
    ``str(execution)`` is a plain-text account of all of it, for a person or
    a model to read.
    """

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int = 0

    @property
    def text(self) -> str | None:
        """The text of the cell's value (its main result), or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    def __str__(self) -> str:
        out: List[str] = []
        stdout, stderr = "".join(self.logs.stdout), "".join(self.logs.stderr)
        if stdout:
            out.append("stdout:\n" + stdout.rstrip("\n"))
        if stderr:
            out.append("stderr:\n" + stderr.rstrip("\n"))
        for r in self.results:
            head = "result" if r.is_main_result else "display"
            others = [f for f in r.formats() if f != "text"]
            also = f" [{', '.join(others)}]" if others else ""
            out.append(f"{head}{also}:\n{r.text or ''}".rstrip())
        if self.error is not None:
            tb = self.error.traceback.rstrip("\n")
            out.append(f"error: {self.error}" + (f"\n{tb}" if tb else ""))
        return "\n".join(out) if out else "(no output)"

    def __repr__(self) -> str:
        return (
            f"Execution(results={self.results!r}, logs=Logs(stdout={_short_list(self.logs.stdout)}, "
            f"stderr={_short_list(self.logs.stderr)}), error={self.error!r}, "
            f"execution_count={self.execution_count})"
        )


def _short(s: str | None, n: int = 200) -> str | None:
    if s is None or len(s) <= n:
        return s
    return s[:n] + f"... [{len(s) - n} more characters]"


def _short_list(chunks: List[str]) -> str:
    joined = "".join(chunks)
    return repr([_short(joined, 500)]) if joined else "[]"


@dataclass(frozen=True)
class Context:
    """A kernel of its own: ``id`` (``"default"`` or ``ctx_...``),
    ``language`` (``"python"``) and ``cwd``."""

    id: str
    language: str = "python"
    cwd: str = ""

    @classmethod
    def from_json(cls, d: Any) -> Context:
        if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not d["id"]:
            raise TransportError(f"a context answer has no id: {d!r:.200}")
        return cls(id=d["id"], language=str(d.get("language") or "python"), cwd=str(d.get("cwd") or ""))


ContextArg = Union[Context, str]


def _context_id(context: ContextArg) -> str:
    cid = context.id if isinstance(context, Context) else context
    if not isinstance(cid, str) or not cid:
        raise ValueError("context must be a Context or a non-empty context id")
    return cid


class Contexts:
    """The code contexts of one sandbox (``sbx.contexts``): at most 16."""

    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._t = transport
        self._base = f"/sandboxes/{sandbox_id}/contexts"

    def _path(self, context: ContextArg) -> str:
        return f"{self._base}/{urllib.parse.quote(_context_id(context), safe='')}"

    def create(self, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Context:
        """Start a new kernel. Relative ``cwd`` is under /workspace (the
        default); ``env`` is added to the sandbox's environment."""
        body: dict[str, Any] = {}
        if cwd is not None:
            body["cwd"] = str(cwd)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        return Context.from_json(self._t.json("POST", self._base, json_body=body) or {})

    def list(self) -> List[Context]:
        """The sandbox's contexts (the default one once a call has made it)."""
        d = self._t.json("GET", self._base) or {}
        cs = d.get("contexts") if isinstance(d, dict) else None
        if not isinstance(d, dict) or not isinstance(cs, (list, type(None))):
            raise TransportError(f"the contexts answer is not a context list: {d!r:.200}")
        return [Context.from_json(c) for c in cs or []]

    def restart(self, context: ContextArg) -> Context:
        """Give the context a new kernel: its state is lost, its id, cwd and
        env stay."""
        return Context.from_json(self._t.json("POST", self._path(context) + "/restart") or {})

    def remove(self, context: ContextArg) -> None:
        """Stop the context's kernel and forget it."""
        self._t.request("DELETE", self._path(context))


def _text(v: Any, what: str, where: str) -> str:
    """A string field of an event: absent is "", anything but a string is a
    server gone wrong (never shown as its repr)."""
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TransportError(f"{where}: {what} is not a string")
    return v


def build_code_body(
    code: str,
    context: ContextArg | None,
    timeout_ms: int | None,
    env: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The JSON body of POST /code, with only what was given."""
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    body: dict[str, Any] = {"code": code}
    if context is not None:
        body["context_id"] = _context_id(context)
    ms = timeout_ms_of(timeout_ms)
    if ms:
        body["timeout_ms"] = ms
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    return body


def run_code(
    transport: Transport,
    sandbox_id: str,
    body: dict[str, Any],
    on_stdout: Callable[[str], object] | None = None,
    on_stderr: Callable[[str], object] | None = None,
    on_result: Callable[[Result], object] | None = None,
) -> Execution:
    """POST a cell and follow its event stream to the "end" event."""
    timeout_ms = body.get("timeout_ms")
    # A cell over its timeout is interrupted (and its kernel restarted after
    # 3 s if it ignores that): the stream ends soon after. Without one only
    # the lease bounds it; TCP keepalive notices a vanished server. The
    # wait for the headers is not bounded: the server counts timeout_ms
    # only once the cell runs, after its context's earlier cells and the
    # kernel's start.
    read_timeout = None if not timeout_ms else timeout_ms / 1000 + _READ_SLACK
    where = f"run_code in sandbox {sandbox_id}"
    path = f"/sandboxes/{sandbox_id}/code"
    ex = Execution()
    stream = events(
        transport, path, body, terminal=_CODE_END, where=where, read_timeout=read_timeout,
        max_line=_MAX_LINE, header_timeout=None,
    )
    for ev in stream:
        kind = ev.get("type")
        if kind == "stdout" or kind == "stderr":
            text = _text(ev.get("text"), f"a {kind} event's text", where)
            if not text:
                continue
            (ex.logs.stdout if kind == "stdout" else ex.logs.stderr).append(text)
            cb = on_stdout if kind == "stdout" else on_stderr
            if cb is not None:
                cb(text)
        elif kind == "result":
            r = ev.get("result")
            if not isinstance(r, dict):
                raise TransportError(f"{where}: a result event has no result")
            res = Result.from_json(r)
            ex.results.append(res)
            if on_result is not None:
                on_result(res)
        elif kind == "exception":
            e = ev.get("exception")
            if not isinstance(e, dict):
                raise TransportError(f"{where}: an exception event has no exception")
            ex.error = ExecutionError(
                name=_text(e.get("name"), "the exception's name", where) or "Error",
                value=_text(e.get("value"), "the exception's value", where),
                traceback=_text(e.get("traceback"), "the exception's traceback", where),
            )
        elif kind == "end":
            n = ev.get("execution_count")
            if n is None:
                n = 0
            if isinstance(n, bool) or not isinstance(n, int):
                raise TransportError(f"{where}: the end event's execution_count is not a whole number: {n!r:.50}")
            ex.execution_count = n
        # Unknown event types are skipped: newer servers may add some.
    return ex
