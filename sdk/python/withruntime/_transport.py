"""HTTP transport: one small layer over http.client.

Each thread keeps its own keep-alive connections (a short list, so that a
request made while a stream is open on the same thread, from an exec
callback say, gets a second connection instead of a busy one). Nothing is
shared between threads, so the transport is safe to use from any number of
them at once.

Every failure to reach the server becomes a TransportError; every error
answer becomes an APIError carrying the server's stable code.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import _local
from ._local import START_HINT
from ._version import __version__
from .errors import APIError, TransportError, api_error_from_detail, code_for_status

DEFAULT_BASE_URL = _local.DEFAULT_BASE_URL
API_PREFIX = "/v1"

# How long a plain request may wait for the server's answer, in seconds.
DEFAULT_TIMEOUT = 300.0
CONNECT_TIMEOUT = 30.0
# Idle connections kept per thread.
_MAX_IDLE = 4
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class _Default:
    """Marks "the transport's default timeout" (None means no timeout)."""


_DEFAULT = _Default()


class _BodyError(Exception):
    """Carries an exception raised while producing a request body (reading a
    local file, say), so it is not mistaken for a network failure."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _guarded(chunks: Iterable[bytes]) -> Iterator[bytes]:
    try:
        yield from chunks
    except Exception as e:  # noqa: BLE001 - re-raised by the caller as it was
        raise _BodyError(e) from e


def _is_dropped(sock: socket.socket) -> bool:
    """True when an idle keep-alive socket was closed by the server (it is
    readable: EOF, or bytes nobody asked for)."""
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(sock, select.POLLIN)
            return bool(p.poll(0))
        r, _, _ = select.select([sock], [], [], 0)
        return bool(r)
    except (OSError, ValueError):
        return True


def _tune(sock: socket.socket) -> None:
    # Requests are small and sent in a few writes: no Nagle delay.
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # A stream may legitimately stay silent for a long time (a quiet
    # command); TCP keepalive notices a peer that vanished without a word.
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 15)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 4)


def resolve_config(base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """Arguments first, then WITHRUNTIME_BASE_URL / WITHRUNTIME_API_KEY; with
    no key from either on the default address, the local daemon's admin key
    (see _local)."""
    url, key, _ = _resolve(base_url, api_key)
    return url, key


def _resolve(base_url: str | None, api_key: str | None) -> tuple[str, str | None, int | None]:
    """resolve_config, and the uid whose listener alone may receive the key
    (the local admin key's owner; None for a key the caller gave)."""
    url = base_url or os.environ.get("WITHRUNTIME_BASE_URL") or _local.DEFAULT_BASE_URL
    key = api_key if api_key is not None else os.environ.get("WITHRUNTIME_API_KEY")
    owner = None
    if not key and api_key is None:
        got = _local.local_key_and_owner(url)
        if got:
            key, owner = got
    return url.rstrip("/"), (key or None), owner


class Transport:
    """Sends requests to one server with one API key."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url, self._api_key, self._owner = _resolve(base_url, api_key)
        self._config = (base_url, api_key)
        # With no base URL configured, a refused connection to the default
        # address starts the local daemon (it exits when idle); a base URL
        # the caller gave is used as it is.
        self._may_start_daemon = (
            not base_url and not os.environ.get("WITHRUNTIME_BASE_URL") and self.base_url == _local.DAEMON_URL
        )
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, got {self.base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/") + API_PREFIX
        self.timeout = timeout
        self._local = threading.local()
        self._ssl_context = ssl.create_default_context() if self._https else None

    # -- connections -------------------------------------------------------

    def _idle(self) -> list[http.client.HTTPConnection]:
        idle = getattr(self._local, "idle", None)
        if idle is None:
            idle = self._local.idle = []
        return idle

    def _acquire(self) -> tuple[http.client.HTTPConnection, bool]:
        """A connection for this thread, and whether it was used before."""
        idle = self._idle()
        while idle:
            conn = idle.pop()
            if conn.sock is None:
                return conn, False
            if not _is_dropped(conn.sock):
                return conn, True
            conn.close()
        if self._https:
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=CONNECT_TIMEOUT, context=self._ssl_context,
                blocksize=1 << 16,
            )
        else:
            conn = http.client.HTTPConnection(
                self._host, self._port, timeout=CONNECT_TIMEOUT, blocksize=1 << 16
            )
        return conn, False

    def _release(self, conn: http.client.HTTPConnection) -> None:
        idle = self._idle()
        if len(idle) < _MAX_IDLE:
            idle.append(conn)
        else:
            conn.close()

    def _start_daemon(self) -> None:
        """Start the local daemon (see _local.start_daemon), then take the
        admin key it keeps and its owner, as at construction: a daemon
        started on a fresh data dir has just written them."""
        _local.start_daemon()
        _, self._api_key, self._owner = _resolve(*self._config)

    def close(self) -> None:
        """Close this thread's idle connections."""
        idle = self._idle()
        while idle:
            idle.pop().close()

    # -- requests ----------------------------------------------------------

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        u = self._prefix + path
        if query:
            # A list or tuple is the parameter repeated, once per element.
            q = {
                k: [_query_value(x) for x in v] if isinstance(v, (list, tuple)) else _query_value(v)
                for k, v in query.items()
                if v is not None
            }
            if q:
                u += "?" + urllib.parse.urlencode(q, doseq=True, quote_via=urllib.parse.quote, safe="/")
        return u

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        h = {"User-Agent": f"withruntime-python/{__version__}", "Accept": "application/json"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        if extra:
            h.update(extra)
        return h

    def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json_body: Any = None,
        body: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None | _Default = _DEFAULT,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; return the connection and a 2xx response whose
        body is still unread. Error answers are read and raised as APIError."""
        url = self.url(path, query)
        hdrs = self._headers(headers)
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        replayable = body is None or isinstance(body, (bytes, bytearray))
        send_body: Any = body if replayable else _guarded(body)  # type: ignore[arg-type]
        read_timeout = self.timeout if isinstance(timeout, _Default) else timeout
        where = f"{method} {self.base_url}{url}"

        attempt, started = 0, False
        while True:
            attempt += 1
            conn, reused = self._acquire()
            sent = early_answer = False
            try:
                if conn.sock is None:
                    conn.timeout = CONNECT_TIMEOUT
                    if self._owner is not None:
                        _local.connect_checked(conn, self._host, self._port, self._owner)
                    else:
                        conn.connect()
                    _tune(conn.sock)  # type: ignore[arg-type]
                conn.sock.settimeout(read_timeout)  # type: ignore[union-attr]
                conn.request(method, url, body=send_body, headers=hdrs)
                sent = True
                resp = conn.getresponse()
            except _BodyError as e:
                conn.close()
                raise e.error from None
            except (OSError, http.client.HTTPException) as e:
                early = None if sent else _early_answer(conn)
                if early is not None:
                    resp, early_answer = early, True
                else:
                    conn.close()
                    if isinstance(e, ConnectionRefusedError) and self._may_start_daemon and not started:
                        # Nothing was sent: any request may go again once
                        # the daemon answers, with the key it keeps.
                        started = True
                        try:
                            self._start_daemon()
                        except TransportError as se:
                            raise TransportError(f"{where}: connection refused: {se}") from e
                        hdrs = self._headers(headers)
                        if json_body is not None:
                            hdrs["Content-Type"] = "application/json"
                        continue
                    stale = isinstance(
                        e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
                    )
                    if attempt == 1 and reused and stale and replayable and method in _IDEMPOTENT:
                        continue
                    raise TransportError(f"{where}: {_describe(e)}") from e
            break

        if resp.status >= 400:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise TransportError(f"{where}: reading the error answer: {_describe(e)}") from e
            if early_answer:
                conn.close()
            else:
                self._release(conn)
            raise _api_error(resp.status, raw)
        return conn, resp

    def request(self, method: str, path: str, **kw: Any) -> tuple[int, bytes]:
        """Send a request and read the whole answer: (status, body)."""
        conn, resp = self._open(method, path, **kw)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise TransportError(f"{method} {self.base_url}{path}: reading the answer: {_describe(e)}") from e
        self._release(conn)
        return resp.status, data

    def json(self, method: str, path: str, **kw: Any) -> Any:
        """Send a request and decode its JSON answer (None for an empty one)."""
        status, data = self.request(method, path, **kw)
        if not data.strip():
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise TransportError(
                f"{method} {self.base_url}{path}: answer {status} is not JSON: {data[:200]!r}"
            ) from e

    @contextlib.contextmanager
    def stream(self, method: str, path: str, **kw: Any) -> Iterator[http.client.HTTPResponse]:
        """Send a request and yield the response to read incrementally. The
        connection is kept only if the body was read to its end.
        ``body_timeout`` (default: ``timeout``) bounds each read of the body
        once the headers are in."""
        body_timeout = kw.pop("body_timeout", _DEFAULT)
        conn, resp = self._open(method, path, **kw)
        try:
            if not isinstance(body_timeout, _Default) and conn.sock is not None:
                conn.sock.settimeout(body_timeout)
            yield resp
        except BaseException:
            conn.close()
            raise
        if resp.isclosed() and conn.sock is not None:
            self._release(conn)
        else:
            conn.close()


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(os.fspath(v)) if isinstance(v, os.PathLike) else str(v)


def _describe(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return f"connection refused: {START_HINT}"
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, http.client.IncompleteRead):
        return "the answer was cut short"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _early_answer(conn: http.client.HTTPConnection) -> http.client.HTTPResponse | None:
    """After a failure while sending, the server may already have answered
    (refusing a body it does not want, say): return that answer if any."""
    try:
        if conn.sock is None:
            return None
        conn.sock.settimeout(2.0)
        resp = conn.getresponse()
    except Exception:  # noqa: BLE001 - any failure means there is no answer
        return None
    if resp.status < 400:
        return None
    return resp


def _api_error(status: int, raw: bytes) -> APIError:
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return api_error_from_detail(body["error"], status)
    text = raw.decode("utf-8", "replace").strip()[:500] or http.client.responses.get(status, "")
    return APIError(code_for_status(status), status, text or f"HTTP {status}")
