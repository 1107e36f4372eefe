"""Running commands: the exec stream, its result, and background processes."""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AnyStr, Generic, Union

from ._stream import events, timeout_ms_of
from .errors import CommandError, TransportError

if TYPE_CHECKING:
    from ._transport import Transport

__all__ = ["ExecResult", "Process", "OUTPUT_LIMIT"]

# At most this many characters (bytes with text=False) of each stream are
# kept in an ExecResult (the last ones); the callbacks still see everything.
OUTPUT_LIMIT = 16 * 1024 * 1024

# The event that ends an exec stream.
_EXEC_END = frozenset({"exit"})

# The server cuts an exec stream at a line over 256 KiB; a longer one is a
# server gone wrong, refused before it fills the memory.
_MAX_LINE = 1024 * 1024

# One long-poll of a background process waits at most this long on the server.
_WAIT_SLICE_MS = 30_000

Command = Union[str, Sequence[str]]
OutputCallback = Callable[[str], object]
BytesOutputCallback = Callable[[bytes], object]


@dataclass
class ExecResult(Generic[AnyStr]):
    """How a command ended, with its output.

    ``stdout`` and ``stderr`` are ``str`` (output decoded as UTF-8, bytes
    that are not UTF-8 replaced by U+FFFD), or the exact ``bytes`` when the
    command was run with ``text=False``. They hold at most the last 16 MiB
    (counted in characters, or bytes) of each stream; ``stdout_truncated`` /
    ``stderr_truncated`` say that older output was dropped. A process killed by signal N has
    ``exit_code`` 128+N, as in a shell (137 after ``kill()``); -1 means the
    server reported no exit code.
    """

    exit_code: int
    stdout: AnyStr
    stderr: AnyStr
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    pid: int | None = None
    duration_ms: int | None = None

    @property
    def ok(self) -> bool:
        """True when the command exited with code 0 and did not time out."""
        return self.exit_code == 0 and not self.timed_out

    def check(self) -> ExecResult[AnyStr]:
        """Raise CommandError unless the command succeeded; return self."""
        if not self.ok:
            raise CommandError(self)
        return self


class _Tail(Generic[AnyStr]):
    """The last `limit` characters (or bytes) of a stream, kept without
    quadratic copying."""

    def __init__(self, limit: int, empty: AnyStr) -> None:
        self.limit = limit
        self.empty = empty
        self.parts: list[AnyStr] = []
        self.size = 0
        self.truncated = False

    def add(self, s: AnyStr) -> None:
        self.parts.append(s)
        self.size += len(s)
        if self.size > 2 * self.limit + 65536:
            self._compact()

    def _compact(self) -> None:
        joined = self.empty.join(self.parts)
        if len(joined) > self.limit:
            joined = joined[len(joined) - self.limit :] if self.limit > 0 else self.empty
            self.truncated = True
        self.parts = [joined]
        self.size = len(joined)

    def text(self) -> AnyStr:
        self._compact()
        return self.parts[0] if self.parts else self.empty


def _chunk(ev: Mapping[str, Any], text: bool, where: str) -> str | bytes:
    """The output an event carries: ``data`` when it was valid UTF-8, else
    ``data_b64`` (base64 of the exact bytes)."""
    b64 = ev.get("data_b64")
    if b64 is None:
        data = str(ev.get("data") or "")
        return data if text else data.encode("utf-8")
    try:
        raw = base64.b64decode(str(b64), validate=True)
    except (binascii.Error, ValueError) as e:
        raise TransportError(f"{where}: an event's data_b64 is not base64") from e
    # The server never splits a UTF-8 character across two events, so each
    # chunk decodes on its own.
    return raw.decode("utf-8", errors="replace") if text else raw


def output_of(d: Mapping[str, Any], name: str, text: bool) -> str | bytes:
    """A process's ``stdout`` or ``stderr`` as text, or its exact bytes (from
    ``<name>_b64`` when the server sent it: the output is not UTF-8)."""
    if text:
        return str(d.get(name) or "")
    b64 = d.get(name + "_b64")
    if b64 is None:
        return str(d.get(name) or "").encode("utf-8")
    try:
        return base64.b64decode(str(b64), validate=True)
    except (binascii.Error, ValueError) as e:
        raise TransportError(f"process {d.get('pid')}: {name}_b64 is not base64") from e


def build_exec_body(
    cmd: Command,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout_ms: int | None,
    stdin: str | bytes | None,
    background: bool,
) -> dict[str, Any]:
    """The JSON body of POST /exec, with only what was given."""
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("cmd is empty")
        body: dict[str, Any] = {"cmd": cmd}
    elif isinstance(cmd, (bytes, bytearray)):
        raise TypeError("cmd must be a str (a shell command) or a list of str (an argv)")
    else:
        argv = list(cmd)
        if not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
            raise ValueError("cmd must be a non-empty list of str when given as an argv")
        body = {"cmd": argv}
    if cwd is not None:
        body["cwd"] = str(cwd)
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if stdin is not None:
        body["stdin"] = stdin.decode("utf-8") if isinstance(stdin, (bytes, bytearray)) else stdin
    ms = timeout_ms_of(timeout_ms)
    if ms:
        body["timeout_ms"] = ms
    if background:
        body["background"] = True
    return body


def run_stream(
    transport: Transport,
    sandbox_id: str,
    body: dict[str, Any],
    on_stdout: Callable[[Any], object] | None,
    on_stderr: Callable[[Any], object] | None,
    text: bool = True,
) -> ExecResult[Any]:
    """POST an exec request and follow its ndjson event stream to the end.
    With ``text=False`` the output (and what the callbacks get) is bytes."""
    limit = OUTPUT_LIMIT
    empty: Any = "" if text else b""
    out: _Tail[Any] = _Tail(limit, empty)
    err: _Tail[Any] = _Tail(limit, empty)
    pid: int | None = None
    timeout_ms = body.get("timeout_ms")
    # With a timeout of its own the command ends by then; without one, only
    # the lease bounds it, so reading waits as long as the stream is alive
    # (TCP keepalive notices a vanished server).
    read_timeout = None if not timeout_ms else timeout_ms / 1000 + 120
    where = f"exec in sandbox {sandbox_id}"
    path = f"/sandboxes/{sandbox_id}/exec"
    result: ExecResult[Any] | None = None
    stream = events(
        transport, path, body, terminal=_EXEC_END, where=where, read_timeout=read_timeout, max_line=_MAX_LINE
    )
    for ev in stream:
        kind = ev.get("type")
        if kind == "stdout":
            data = _chunk(ev, text, where)
            out.add(data)
            if on_stdout is not None and data:
                on_stdout(data)
        elif kind == "stderr":
            data = _chunk(ev, text, where)
            err.add(data)
            if on_stderr is not None and data:
                on_stderr(data)
        elif kind == "start":
            pid = ev.get("pid")
        elif kind == "exit":
            code = ev.get("exit_code")
            if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
                raise TransportError(f"{where}: the exit event's exit_code is not a whole number: {code!r:.50}")
            result = ExecResult(
                exit_code=-1 if code is None else code,
                stdout=out.text(),
                stderr=err.text(),
                timed_out=bool(ev.get("timed_out")),
                stdout_truncated=out.truncated,
                stderr_truncated=err.truncated,
                pid=pid,
                duration_ms=ev.get("duration_ms"),
            )
        # Unknown event types are skipped: newer servers may add some.
    assert result is not None  # events() ends only after the exit event
    return result


class Process:
    """A command started with ``exec(..., background=True)``.

    It lives until it exits, is killed, or the lease ends. ``stdout`` and
    ``stderr`` fetch the output so far (the last 1 MiB of each stream, as the
    server keeps it); ``wait()`` long-polls until it ends. Started with
    ``text=False``, its output is the exact ``bytes``.
    """

    def __init__(
        self,
        transport: Transport,
        sandbox_id: str,
        data: Mapping[str, Any],
        check: bool = False,
        text: bool = True,
    ) -> None:
        self._t = transport
        self.sandbox_id = sandbox_id
        self.text = text
        if not isinstance(data.get("pid"), int):
            raise TransportError(f"sandbox {sandbox_id}: the process answer has no pid: {dict(data)!r:.200}")
        self.pid: int = data["pid"]
        self._check = check
        self._data: dict[str, Any] = {}
        self._update(data)

    def _update(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    @property
    def _path(self) -> str:
        return f"/sandboxes/{self.sandbox_id}/processes/{self.pid}"

    @property
    def cmd(self) -> str | list[str]:
        """The command as it was started."""
        return self._data.get("cmd", "")

    def refresh(self) -> Process:
        """Fetch the process's current state and output; return self."""
        self._update(self._t.json("GET", self._path))
        return self

    @property
    def is_running(self) -> bool:
        """Whether the process is still running (asks the server)."""
        return bool(self.refresh()._data.get("running"))

    def poll(self) -> int | None:
        """The exit code if the process has ended, else None (asks the server)."""
        self.refresh()
        return None if self._data.get("running") else self._exit_code()

    @property
    def exit_code(self) -> int | None:
        """The exit code as last seen (None while running; no request made)."""
        return None if self._data.get("running") else self._exit_code()

    def _exit_code(self) -> int:
        code = self._data.get("exit_code")
        return -1 if code is None else int(code)

    @property
    def stdout(self) -> Any:
        """Output so far on stdout (asks the server): str, or bytes with text=False."""
        return output_of(self.refresh()._data, "stdout", self.text)

    @property
    def stderr(self) -> Any:
        """Output so far on stderr (asks the server): str, or bytes with text=False."""
        return output_of(self.refresh()._data, "stderr", self.text)

    def wait(self, timeout: float | None = None) -> ExecResult[Any]:
        """Wait for the process to end and return its result.

        ``timeout`` in seconds (None waits as long as it runs). Raises the
        built-in TimeoutError when it passes first; the process keeps running.
        With ``check=True`` given to exec, raises CommandError on failure.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._data.get("running", True):
            if deadline is None:
                slice_ms = _WAIT_SLICE_MS
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"process {self.pid} still running after {timeout} s")
                slice_ms = max(1, min(_WAIT_SLICE_MS, int(remaining * 1000)))
            started = time.monotonic()
            self._update(
                self._t.json(
                    "GET",
                    self._path,
                    query={"wait": True, "timeout_ms": slice_ms},
                    timeout=slice_ms / 1000 + 60,
                )
            )
            # A server that answers at once instead of long-polling must
            # not turn this into a busy loop.
            if self._data.get("running") and time.monotonic() - started < 0.05:
                time.sleep(0.2)
        result = self._result()
        if self._check:
            result.check()
        return result

    def _result(self) -> ExecResult[Any]:
        d = self._data
        return ExecResult(
            exit_code=self._exit_code(),
            stdout=output_of(d, "stdout", self.text),
            stderr=output_of(d, "stderr", self.text),
            timed_out=bool(d.get("timed_out")),
            stdout_truncated=bool(d.get("stdout_truncated")),
            stderr_truncated=bool(d.get("stderr_truncated")),
            pid=self.pid,
        )

    def kill(self) -> None:
        """Kill the process (and what it started). Killing an ended one is harmless."""
        self._update(self._t.json("POST", self._path + "/kill"))

    def __repr__(self) -> str:
        state = "running" if self._data.get("running") else f"exited {self._exit_code()}"
        return f"<Process pid={self.pid} {state} cmd={self.cmd!r}>"
