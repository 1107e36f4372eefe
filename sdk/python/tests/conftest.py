"""Fixtures: an in-process fake server for the unit tests, and a live
server (from WITHRUNTIME_BASE_URL and WITHRUNTIME_API_KEY) for the tests
marked `live`.

The live tests run against the server those variables name. When they are
unset, the session starts a real server itself (`withruntime serve` on a
free loopback port with a fresh data dir) where it can: as root, with the
`withruntime` binary on PATH (or named by WITHRUNTIME_BIN) and the host set
up by `withruntime setup`. Otherwise the live tests are skipped, with that
reason.

The suite needs no network beyond loopback: while it runs, a connection to
any other address fails at once (unless WITHRUNTIME_BASE_URL names a server
elsewhere, whose addresses are then allowed too).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeserver import FakeServer  # noqa: E402

import withruntime  # noqa: E402

# A small sandbox, for live tests that do not need the default size.
SMALL: dict[str, Any] = {"vcpus": 1, "memory_mib": 1024}


# -- loopback only ----------------------------------------------------------

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed_addresses() -> set[str]:
    """The addresses of the live server when it is not on loopback."""
    url = os.environ.get("WITHRUNTIME_BASE_URL")
    host = urllib.parse.urlsplit(url).hostname if url else None
    if not host:
        return set()
    try:
        return {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


def _check_destination(sock: socket.socket, address: Any, allowed: set[str]) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return
    host = str(address[0])
    try:
        loopback = ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        loopback = False
    if not loopback and host not in allowed:
        raise PermissionError(f"the test suite uses no network beyond loopback: refused a connection to {host}")


@pytest.fixture(scope="session", autouse=True)
def _loopback_only() -> Iterator[None]:
    allowed = _allowed_addresses()

    def connect(self: socket.socket, address: Any) -> None:
        _check_destination(self, address, allowed)
        return _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_destination(self, address, allowed)
        return _real_connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore
    socket.socket.connect_ex = connect_ex  # type: ignore
    try:
        yield
    finally:
        socket.socket.connect = _real_connect  # type: ignore
        socket.socket.connect_ex = _real_connect_ex  # type: ignore


# -- the fake server --------------------------------------------------------


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """A fake server; the environment points the SDK at it."""
    srv = FakeServer()
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", srv.base_url)
    monkeypatch.setenv("WITHRUNTIME_API_KEY", srv.state.api_key or "")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def sbx(fake: FakeServer) -> withruntime.Sandbox:
    """A sandbox on the fake server."""
    return withruntime.Sandbox.create()


# -- the live server --------------------------------------------------------

LIVE_VARS = ("WITHRUNTIME_BASE_URL", "WITHRUNTIME_API_KEY")


def _live_missing() -> list[str]:
    return [v for v in LIVE_VARS if not os.environ.get(v)]


# Where the live server serves E2B's API (serve --e2b-listen): the session
# server sets it; with a server of your own, set it beside LIVE_VARS.
E2B_URL_VAR = "WITHRUNTIME_E2B_URL"
# The live server's --e2b-domain.
E2B_TEST_DOMAIN = "e2b.test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _SessionServer:
    """A `withruntime serve` process that this test session started."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_dir = ""
        self.why_not = ""

    def start(self) -> None:
        binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime")
        if binary and not os.access(binary, os.X_OK):
            self.why_not = f"{binary} is not an executable withruntime binary"
            return
        if os.geteuid() != 0:
            self.why_not = "starting a server needs root"
            return
        if not binary:
            self.why_not = "no withruntime binary on PATH (or WITHRUNTIME_BIN) to start a server with"
            return
        port, e2b_port = _free_port(), _free_port()
        self.data_dir = tempfile.mkdtemp(prefix="withruntime-pytest-")
        url = f"http://127.0.0.1:{port}"
        log = open(os.path.join(self.data_dir, "server.log"), "wb")
        args = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", self.data_dir]
        # A binary older than --e2b-listen still serves the other tests
        # (the E2B ones then skip, which fails a CI run).
        e2b = "--e2b-listen" in subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
        if e2b:
            # E2B's getHost(port) names "<port>-<id>.<domain>": the domain
            # is a name the tests send as Host (test_e2b_preview.py).
            args += ["--e2b-listen", f"127.0.0.1:{e2b_port}", "--e2b-domain", E2B_TEST_DOMAIN]
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                urllib.request.urlopen(url + "/v1/health", timeout=1).close()
                with open(os.path.join(self.data_dir, "admin.key")) as f:
                    os.environ["WITHRUNTIME_API_KEY"] = f.read().strip()
                os.environ["WITHRUNTIME_BASE_URL"] = url
                if e2b:
                    os.environ[E2B_URL_VAR] = f"http://127.0.0.1:{e2b_port}"
                return
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(self.data_dir, "server.log"), "rb") as f:
            self.why_not = "the server did not start: " + f.read().decode(errors="replace")[-2000:]
        self.stop()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            for v in (*LIVE_VARS, E2B_URL_VAR):
                os.environ.pop(v, None)
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = ""


_session_server = _SessionServer()


def pytest_configure(config: pytest.Config) -> None:
    if _live_missing():
        _session_server.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    _session_server.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Under CI nothing real may be skipped: a missing framework, binary or
    # server is a failure there, not a quiet green run.
    if os.environ.get("CI") != "true":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and session.exitstatus == pytest.ExitCode.OK:
        reporter.write_line(f"CI=true: {len(skipped)} skipped test(s) count as failures", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = _live_missing()
    if not missing:
        return
    skip = pytest.mark.skip(
        reason=f"live test: set {' and '.join(missing)} to a running withruntime server "
        f"(the session could not start one: {_session_server.why_not})"
    )
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def live_server() -> Iterator[dict[str, str]]:
    """The live server's base_url and api_key, as the environment gives them
    when the session starts.

    At the end of the session it checks that every sandbox created during
    the session (by a test or by an example run as a subprocess) was
    stopped: any still running or paused is stopped, and the session fails.
    """
    cfg = {"base_url": os.environ["WITHRUNTIME_BASE_URL"], "api_key": os.environ["WITHRUNTIME_API_KEY"]}
    before = {s.id for s in withruntime.Sandbox.list(**cfg)}
    # The server's clock and ours may differ a little.
    started = datetime.now(timezone.utc) - timedelta(seconds=60)
    yield cfg
    left = []
    for s in withruntime.Sandbox.list(**cfg):
        if s.id in before or s.state == "ended" or (s.created_at and s.created_at < started):
            continue
        left.append(f"{s.id} ({s.state}, metadata {s.metadata})")
        try:
            withruntime.Sandbox(s.id, base_url=cfg["base_url"], api_key=cfg["api_key"]).stop()
        except withruntime.Error:
            pass
    assert not left, "sandboxes made by the tests were left running: " + ", ".join(left)


@pytest.fixture(scope="module")
def live_sbx(live_server: dict[str, str]) -> Iterator[withruntime.Sandbox]:
    """One small real sandbox per test module, stopped at the end."""
    with withruntime.Sandbox.create(timeout_seconds=900, metadata={"test": "sdk-python"}, **SMALL) as s:
        yield s


@pytest.fixture(scope="session")
def e2b_env(live_server: dict[str, str]) -> Iterator[dict[str, str]]:
    """E2B's client configuration for the live server: E2B_API_URL and
    E2B_SANDBOX_URL at its --e2b-listen address, its key as E2B_API_KEY.
    Set in the environment from the first test that asks until the session
    ends (module fixtures use it too), and returned as a dict."""
    url = os.environ.get(E2B_URL_VAR)
    if not url:
        pytest.skip(f"set {E2B_URL_VAR} to the live server's --e2b-listen address (http://HOST:PORT)")
    env = {"E2B_API_URL": url, "E2B_SANDBOX_URL": url, "E2B_API_KEY": live_server["api_key"]}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def wait_until(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll predicate() until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
