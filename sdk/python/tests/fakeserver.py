"""An in-process stand-in for the withruntime server.

It speaks the HTTP contract of api/*.go (JSON bodies, the route list of
api/routes.go, exec as a chunked application/x-ndjson event stream) over
real sockets on 127.0.0.1, so the SDK's transport, streaming and error
handling run for real. It stands in until the live tests (marked ``live``)
run the same SDK against the real server; where the two could differ, the
live tests are the judge.

Tests steer it through the FakeState it exposes: ``exec_handler`` decides the
events of a foreground exec, ``fail`` makes one route answer an error,
``archive_override`` serves a crafted tar, and ``requests`` records what the
SDK sent.
"""

from __future__ import annotations

import io
import json
import posixpath
import socket
import tarfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

NOW = "2026-01-02T03:04:05.123456789Z"
LATER = "2026-01-02T03:09:05Z"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    chunked: bool
    chunks: int


@dataclass
class FakeState:
    api_key: str | None = "test-key"
    sandboxes: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"/", "/workspace"})
    links: dict[str, str] = field(default_factory=dict)
    processes: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    client_ports: set[int] = field(default_factory=set)
    conns: list[socket.socket] = field(default_factory=list)
    # (method, last path segment or "create") -> (status, body bytes, content type)
    fail: dict[tuple[str, str], tuple[int, bytes, str]] = field(default_factory=dict)
    exec_handler: Callable[[dict[str, Any]], list[Any]] | None = None
    # The events of POST code (default: the code's text as a main result).
    code_handler: Callable[[dict[str, Any]], list[Any]] | None = None
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    archive_override: bytes | None = None
    polls_until_exit: int = 2
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_id: int = 1
    next_pid: int = 100

    def fail_with(self, method: str, action: str, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self.fail[(method, action)] = (status, body, "application/json")

    def add_sandbox(self) -> str:
        with self.lock:
            sid = f"sbx-{self.next_id}"
            self.next_id += 1
        self.sandboxes[sid] = _sandbox(sid, {})
        return sid


def _sandbox(sid: str, req: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": sid,
        "state": "running",
        "image": req.get("image", "default"),
        "vcpus": req.get("vcpus", 2),
        "memory_mib": req.get("memory_mib", 4096),
        "on_lease_end": req.get("on_lease_end", "stop"),
        "metadata": req.get("metadata") or {},
        "network": req.get("network") or {"internet": False},
        "created_at": NOW,
        "started_at": NOW,
        "lease_ends_at": LATER,
        "cost_micros": 1234,
        "usage": {"seconds": 90.0, "cpu_seconds": 12.5, "memory_gib_seconds": 360.0},
    }


def _abs(p: str) -> str:
    if not p.startswith("/"):
        p = "/workspace/" + p
    return posixpath.normpath(p)


def _file_info(state: FakeState, path: str) -> dict[str, Any] | None:
    info = {"name": posixpath.basename(path) or "/", "path": path, "mtime": NOW}
    if path in state.links:
        return {**info, "type": "symlink", "size": 0, "mode": 0o777, "target": state.links[path]}
    if path in state.dirs:
        return {**info, "type": "dir", "size": 4096, "mode": 0o755}
    if path in state.files:
        return {**info, "type": "file", "size": len(state.files[path]), "mode": state.modes.get(path, 0o644)}
    return None


def _mkdirs(state: FakeState, path: str) -> None:
    while path not in state.dirs:
        state.dirs.add(path)
        path = posixpath.dirname(path)


def default_exec(req: dict[str, Any]) -> list[Any]:
    """Events for a command: 'echo X' prints X; anything else prints 'ran CMD'."""
    cmd = req["cmd"] if isinstance(req["cmd"], str) else " ".join(req["cmd"])
    out = cmd[5:] + "\n" if cmd.startswith("echo ") else f"ran {cmd}\n"
    return [
        {"type": "start", "pid": 42},
        {"type": "stdout", "data": out},
        {"type": "exit", "exit_code": 0, "duration_ms": 3},
    ]


def default_code(req: dict[str, Any]) -> list[Any]:
    """Events for a cell: its code comes back as the main result's text."""
    return [
        {"type": "result", "result": {"text": req["code"], "is_main_result": True}},
        {"type": "end", "execution_count": 1},
    ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.state.lock:
            self.server.state.conns.append(self.connection)

    # -- plumbing ------------------------------------------------------------

    def _read_body(self) -> tuple[bytes, bool, int]:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            n = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out), True, n
                out += self.rfile.read(size)
                self.rfile.readline()
                n += 1
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length), False, 1 if length else 0

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"error": {"code": code, "message": message}})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        st = self.server.state
        st.client_ports.add(self.client_address[1])
        u = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
        body, chunked, chunks = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        with st.lock:
            st.requests.append(Recorded(method, u.path, query, headers, body, chunked, chunks))
        if u.path == "/v1/health":
            return self._json(200, {"status": "ok"})
        if st.api_key and headers.get("authorization") != f"Bearer {st.api_key}":
            return self._error(401, "unauthorized", "missing or wrong API key")
        parts = u.path.strip("/").split("/")
        if parts[:2] != ["v1", "sandboxes"]:
            return self._error(404, "not_found", f"no route {u.path}")
        rest = parts[2:]
        action = "create" if not rest and method == "POST" else (rest[-1] if rest else "list")
        if (method, action) in st.fail:
            status, b, ctype = st.fail[(method, action)]
            return self._send(status, b, ctype)
        try:
            self._route(method, rest, query, body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- routes ----------------------------------------------------------------

    def _route(self, method: str, rest: list[str], q: dict[str, str], body: bytes) -> None:
        st = self.server.state
        if not rest:
            if method == "POST":
                req = json.loads(body or b"{}")
                sid = st.add_sandbox()
                st.sandboxes[sid] = _sandbox(sid, req)
                return self._json(201, st.sandboxes[sid])
            return self._json(200, {"sandboxes": list(st.sandboxes.values())})
        sid, sub = rest[0], rest[1:]
        sbx = st.sandboxes.get(sid)
        if sbx is None:
            return self._error(404, "not_found", f"no sandbox {sid}")
        key = (method, "/".join(sub))
        if key == ("GET", ""):
            return self._json(200, sbx)
        if key in (("DELETE", ""), ("POST", "stop")):
            sbx.update(state="ended", end_reason="stopped", ended_at=NOW, cost_micros=2345)
            return self._json(200, sbx)
        if key == ("POST", "extend"):
            sbx["lease_ends_at"] = "2026-01-02T04:00:00Z"
            return self._json(200, sbx)
        if key == ("POST", "pause"):
            sbx.update(state="paused", paused_at=NOW)
            return self._json(200, sbx)
        if key == ("POST", "resume"):
            sbx.update(state="running")
            sbx.pop("paused_at", None)
            return self._json(200, sbx)
        if sbx["state"] != "running":
            return self._error(409, "conflict", f"sandbox {sid} is {sbx['state']}")
        if key == ("POST", "exec"):
            return self._exec(json.loads(body))
        if sub and sub[0] == "processes":
            return self._process(method, sub[1:], q)
        if key == ("POST", "code"):
            return self._stream((st.code_handler or default_code)(json.loads(body)))
        if sub and sub[0] == "contexts":
            return self._contexts(method, sub[1:], body)
        if sub and sub[0] in ("files", "archive"):
            return self._files(method, "/".join(sub), q, body)
        return self._error(404, "not_found", f"no route {method} {'/'.join(sub)}")

    def _exec(self, req: dict[str, Any]) -> None:
        st = self.server.state
        if not req.get("cmd"):
            return self._error(400, "invalid_request", "cmd is empty")
        if req.get("background"):
            with st.lock:
                pid = st.next_pid
                st.next_pid += 1
            proc = {
                "pid": pid,
                "cmd": req["cmd"],
                "running": True,
                "started_at": NOW,
                "stdout": "",
                "stderr": "",
                "_polls": st.polls_until_exit,
            }
            st.processes[pid] = proc
            return self._json(201, _public(proc))
        self._stream((st.exec_handler or default_exec)(req))

    def _stream(self, events: list[Any]) -> None:
        """Send events as a chunked ndjson stream; ("sleep", s) pauses and
        ("cut",) drops the connection."""
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for ev in events:
            if isinstance(ev, tuple) and ev[0] == "sleep":
                time.sleep(ev[1])
                continue
            if isinstance(ev, tuple) and ev[0] == "cut":
                # Drop the connection mid-stream, as a dying server would.
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            line = (ev if isinstance(ev, (bytes, str)) else json.dumps(ev) + "\n")
            data = line.encode() if isinstance(line, str) else line
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _contexts(self, method: str, sub: list[str], body: bytes) -> None:
        st = self.server.state
        if not sub and method == "POST":
            req = json.loads(body or b"{}")
            with st.lock:
                cid = f"ctx_{st.next_id:016x}"
                st.next_id += 1
            cwd = req.get("cwd") or "/workspace"
            st.contexts[cid] = {"id": cid, "language": "python", "cwd": _abs(cwd)}
            return self._json(201, st.contexts[cid])
        if not sub and method == "GET":
            return self._json(200, {"contexts": list(st.contexts.values())})
        ctx = st.contexts.get(sub[0]) if sub else None
        if ctx is None:
            return self._error(404, "not_found", f"no context {sub[0] if sub else ''}")
        if method == "POST" and sub[1:] == ["restart"]:
            return self._json(200, ctx)
        if method == "DELETE" and not sub[1:]:
            del st.contexts[sub[0]]
            return self._send(204, b"")
        return self._error(404, "not_found", f"no route {method} contexts/{'/'.join(sub)}")

    def _process(self, method: str, sub: list[str], q: dict[str, str]) -> None:
        st = self.server.state
        if not sub:
            return self._json(200, {"processes": [_public(p) for p in st.processes.values()]})
        proc = st.processes.get(int(sub[0]))
        if proc is None:
            return self._error(404, "not_found", f"no process {sub[0]}")
        if method == "POST" and sub[1:] == ["kill"]:
            if proc["running"]:
                proc.update(running=False, ended_at=NOW)
            return self._json(200, _public(proc))
        if q.get("wait") == "true" and proc["running"]:
            time.sleep(0.01)
            proc["_polls"] -= 1
            proc["stdout"] += f"tick {proc['_polls']}\n"
            if proc["_polls"] <= 0:
                proc.update(running=False, exit_code=3, ended_at=NOW, stderr="done\n")
        return self._json(200, _public(proc))

    def _files(self, method: str, route: str, q: dict[str, str], body: bytes) -> None:
        st = self.server.state
        path = _abs(q.get("path", "."))
        info = _file_info(st, path)
        if route == "files" and method == "GET":
            if path in st.dirs:
                return self._error(409, "conflict", f"{path} is a directory")
            if path not in st.files:
                return self._error(404, "not_found", f"{path}: no such file")
            return self._send(200, st.files[path], "application/octet-stream")
        if route == "files" and method == "PUT":
            if path in st.dirs:
                return self._error(409, "conflict", f"{path} is a directory")
            _mkdirs(st, posixpath.dirname(path))
            st.files[path] = body
            st.modes[path] = int(q.get("mode", "644"), 8)
            return self._json(200, _file_info(st, path))
        if route == "files" and method == "DELETE":
            if info is None:
                return self._error(404, "not_found", f"{path}: no such file")
            inside = [p for p in list(st.files) + list(st.dirs) if p.startswith(path + "/")]
            if inside and q.get("recursive") != "true":
                return self._error(409, "conflict", f"{path} is a directory that is not empty")
            for p in inside + [path]:
                st.files.pop(p, None)
                st.dirs.discard(p)
                st.links.pop(p, None)
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if route == "files/stat":
            if info is None:
                return self._error(404, "not_found", f"{path}: no such file")
            return self._json(200, info)
        if route == "files/list":
            if path not in st.dirs:
                return self._error(404, "not_found", f"{path}: no such directory")
            names = {p for p in list(st.files) + list(st.dirs) + list(st.links) if posixpath.dirname(p) == path and p != path}
            return self._json(200, {"entries": [_file_info(st, p) for p in sorted(names)]})
        if route == "files/mkdir":
            if path in st.files:
                return self._error(409, "conflict", f"{path} is a file")
            _mkdirs(st, path)
            return self._json(200, _file_info(st, path))
        if route == "archive" and method == "GET":
            if st.archive_override is not None:
                return self._send(200, st.archive_override, "application/x-tar")
            if info is None:
                return self._error(404, "not_found", f"{path}: no such file")
            return self._send(200, _tar_of(st, path), "application/x-tar")
        if route == "archive" and method == "PUT":
            _mkdirs(st, path)
            files = size = 0
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tf:
                for m in tf:
                    target = posixpath.normpath(posixpath.join(path, m.name))
                    if m.isdir():
                        _mkdirs(st, target)
                    elif m.issym():
                        _mkdirs(st, posixpath.dirname(target))
                        st.links[target] = m.linkname
                        files += 1
                    elif m.isreg():
                        _mkdirs(st, posixpath.dirname(target))
                        st.files[target] = tf.extractfile(m).read()  # type: ignore[union-attr]
                        st.modes[target] = m.mode
                        files += 1
                        size += m.size
            return self._json(200, {"files": files, "bytes": size})
        return self._error(404, "not_found", f"no route {method} {route}")


def _public(proc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in proc.items() if not k.startswith("_")}


def _tar_of(st: FakeState, root: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        names = sorted(p for p in list(st.files) + list(st.dirs) + list(st.links) if p.startswith(root + "/"))
        if root in st.files or root in st.links:  # one file: one entry, under its name (as the agent does)
            names, root = [root], posixpath.dirname(root)
        for p in names:
            ti = tarfile.TarInfo(p[len(root) + 1 :] if root != "/" else p[1:])
            if p in st.links:
                ti.type, ti.linkname = tarfile.SYMTYPE, st.links[p]
                tf.addfile(ti)
            elif p in st.dirs:
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(ti)
            else:
                ti.size, ti.mode = len(st.files[p]), st.modes.get(p, 0o644)
                tf.addfile(ti, io.BytesIO(st.files[p]))
    return buf.getvalue()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: FakeState


class FakeServer:
    """Runs the fake on 127.0.0.1 on a free port until stop()."""

    def __init__(self) -> None:
        self.state = FakeState()
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.state = self.state
        self.base_url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._thread = threading.Thread(target=self._srv.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def drop_connections(self) -> None:
        """Close every connection the server accepted so far."""
        with self.state.lock:
            conns, self.state.conns = self.state.conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self._srv.shutdown()
        self.drop_connections()
        self._srv.server_close()
