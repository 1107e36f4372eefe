"""A loopback HTTP server that answers canned responses and records what
it was sent: for the request shapes and error mapping of the account-wide
routes (secrets, keys, usage, accounts) and a sandbox's network routes,
which the fake server of fakeserver.py does not model. The live tests
check the same calls against the real server."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Sent:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _any(self) -> None:
        u = urllib.parse.urlsplit(self.path)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._chunked()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        srv = self.server
        with srv.lock:
            srv.sent.append(Sent(self.command, u.path, urllib.parse.parse_qs(u.query), headers, body))
            answer = srv.answers.get((self.command, u.path))
        if answer is None:
            status, ctype, data = 404, "application/json", json.dumps(
                {"error": {"code": "not_found", "message": f"no route {self.command} {u.path}"}}).encode()
        else:
            status, obj = answer
            if isinstance(obj, bytes):
                ctype, data = "text/plain", obj
            else:
                ctype, data = "application/json", (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunked(self) -> bytes:
        # A body of unknown length (a stream the SDK reads as it sends).
        out = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline()

    do_GET = do_POST = do_PUT = do_DELETE = _any


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.sent: list[Sent] = []
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}


class CannedServer:
    """``answer(method, path, status, obj)`` sets what a route answers (obj
    JSON-encoded, bytes sent as text/plain, None an empty body); every other
    route is 404 not_found. ``sent`` lists the requests, oldest first."""

    def __init__(self) -> None:
        self._srv = _Server()
        self.base_url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._thread = threading.Thread(target=self._srv.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def sent(self) -> list[Sent]:
        with self._srv.lock:
            return list(self._srv.sent)

    def answer(self, method: str, path: str, status: int, obj: Any) -> None:
        with self._srv.lock:
            self._srv.answers[(method, path)] = (status, obj)

    def error(self, method: str, path: str, status: int, code: str, message: str) -> None:
        self.answer(method, path, status, {"error": {"code": code, "message": message}})

    def stop(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


@pytest.fixture
def canned() -> Iterator[CannedServer]:
    """A canned server for one test, stopped after it (import it into the
    test module to use it)."""
    srv = CannedServer()
    try:
        yield srv
    finally:
        srv.stop()
