"""Terminals: a command on a pseudo-terminal in the sandbox (``sbx.pty``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._stream import events
from .errors import APIError, TransportError
from .process import _chunk

if TYPE_CHECKING:
    from ._transport import Transport

__all__ = ["Pty", "PtyHandle"]

# A line of a follow stream carries at most 32 KiB of output; a longer one
# is a server gone wrong, refused before it fills the memory.
_MAX_LINE = 1024 * 1024

# How often a broken output stream is resumed in a row.
_RESUMES = 5

# The event that ends a follow stream.
_END = frozenset({"exit"})

# One POST .../stdin carries at most this many bytes (the server's bound).
_MAX_STDIN = 1 << 20


class Pty:
    """The sandbox's terminals: ``sbx.pty.create(cols=80, rows=24, on_data=print)``.

    A terminal is a background process on a pseudo-terminal: its output is
    raw terminal bytes (CRLF line ends, escape sequences), given to
    ``on_data`` as they come; ``send_input`` types into it (``"\\x03"`` is
    Ctrl-C, which interrupts what runs in its foreground).
    """

    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._t = transport
        self._id = sandbox_id

    def create(
        self,
        cols: int = 80,
        rows: int = 24,
        on_data: Callable[[bytes], object] | None = None,
        cmd: str | Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout_ms: int | None = None,
    ) -> PtyHandle:
        """Start ``cmd`` (a str runs under ``/bin/sh -c``, a list is an argv;
        default the user's login shell) on a new ``cols`` x ``rows``
        terminal. TERM is xterm-256color unless ``env`` sets it."""
        body: dict[str, Any] = {"cmd": "", "background": True, "pty": {"cols": int(cols), "rows": int(rows)}}
        if isinstance(cmd, str):
            body["cmd"] = cmd
        elif cmd is not None:
            body["cmd"] = [str(a) for a in cmd]
        if cwd is not None:
            body["cwd"] = str(cwd)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if user is not None:
            body["user"] = user
        if timeout_ms:
            body["timeout_ms"] = int(timeout_ms)
        d = self._t.json("POST", f"/sandboxes/{self._id}/exec", json_body=body) or {}
        return PtyHandle(self._t, self._id, d, on_data)

    def connect(self, pid: int, on_data: Callable[[bytes], object] | None = None) -> PtyHandle:
        """Attach to a running terminal again (after ``disconnect``, or from
        another program): the output it kept (its last 64 KiB) comes first."""
        d = self._t.json("GET", f"/sandboxes/{self._id}/processes/{int(pid)}", query={"output": "false"}) or {}
        if not d.get("pty"):
            raise APIError("conflict", 409, f"process {pid} has no terminal")
        return PtyHandle(self._t, self._id, d, on_data)


class PtyHandle:
    """One terminal: ``send_input``, ``resize``, ``kill``, ``wait``."""

    def __init__(
        self,
        transport: Transport,
        sandbox_id: str,
        process: Mapping[str, Any],
        on_data: Callable[[bytes], object] | None,
    ) -> None:
        self._t = transport
        self._id = sandbox_id
        self.pid: int = int(process.get("pid") or 0)
        """The terminal's process id (for ``sbx.pty.connect``)."""
        self._on_data = on_data
        self._done = threading.Event()
        self._stop = threading.Event()
        self._exit_code: int | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()  # keeps input in order
        if self.pid == 0:
            # It could not start (not found: 127, not executable: 126).
            code = process.get("exit_code")
            self._exit_code = -1 if code is None else int(code)
            msg = str(process.get("stderr") or "").replace("\n", "\r\n").encode()
            if on_data is not None and msg:
                on_data(msg)
            self._done.set()
            return
        self._thread = threading.Thread(target=self._follow, name=f"withruntime-pty-{self.pid}", daemon=True)
        self._thread.start()

    @property
    def _path(self) -> str:
        return f"/sandboxes/{self._id}/processes/{self.pid}"

    def _follow(self) -> None:
        offset = 0
        tries = 0
        try:
            while not self._stop.is_set():
                try:
                    offset, code = self._stream(offset)
                except TransportError:
                    tries += 1
                    if tries > _RESUMES or self._stop.wait(0.2 * tries):
                        raise
                    continue
                if code is not None or self._stop.is_set():
                    self._exit_code = code
                    return
        except BaseException as e:  # noqa: BLE001 - handed to wait()
            self._error = e
        finally:
            self._done.set()

    def _stream(self, offset: int) -> tuple[int, int | None]:
        """Follow the output from ``offset``; return the offset reached and
        the exit code (None when the stream stopped before the end)."""
        where = f"terminal {self.pid} of sandbox {self._id}"
        query = {"stdout_offset": offset} if offset else None
        for ev in events(
            self._t, self._path + "/stream", None, terminal=_END, where=where,
            read_timeout=None, max_line=_MAX_LINE, query=query,
        ):
            if self._stop.is_set():
                break
            kind = ev.get("type")
            if kind in ("stdout", "stderr"):
                data = _chunk(ev, False, where)
                assert isinstance(data, bytes)
                offset += len(data)
                if self._on_data is not None and data:
                    self._on_data(data)
            elif kind == "exit":
                code = ev.get("exit_code")
                return offset, -1 if code is None else int(code)
        return offset, None

    def send_input(self, data: str | bytes) -> None:
        """Type ``data`` into the terminal (a str is sent as UTF-8)."""
        b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        with self._lock:
            for i in range(0, len(b), _MAX_STDIN):
                self._t.request(
                    "POST",
                    self._path + "/stdin",
                    body=b[i : i + _MAX_STDIN],
                    headers={"Content-Type": "application/octet-stream"},
                )

    def resize(self, cols: int, rows: int) -> None:
        """Set the terminal's size; its foreground process gets SIGWINCH."""
        self._t.request("POST", self._path + "/resize", json_body={"cols": int(cols), "rows": int(rows)})

    def kill(self) -> None:
        """End the process and what it started. Killing an ended one is harmless."""
        if self.pid:
            self._t.json("POST", self._path + "/kill")

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the process has ended and all its output went to
        ``on_data``; return its exit code (128+n for a death by signal n).
        Raises TimeoutError after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"terminal {self.pid} still runs after {timeout}s")
        if self._error is not None:
            raise self._error
        if self._exit_code is None:
            raise TransportError(f"terminal {self.pid}: disconnected before it ended")
        return self._exit_code

    def disconnect(self) -> None:
        """Stop following the output; the terminal keeps running
        (``sbx.pty.connect(pid)`` attaches again)."""
        self._stop.set()

    def __repr__(self) -> str:
        state = "running" if not self._done.is_set() else f"exited {self._exit_code}"
        return f"<PtyHandle pid={self.pid} {state}>"
