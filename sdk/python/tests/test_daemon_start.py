"""The SDK starts the local daemon when nothing answers on the default address.

The daemon exits by itself when idle; a program with nothing configured then
found "connection refused". Now the SDK runs `withruntime daemon start` (the
CLI named by WITHRUNTIME_BINARY, else on PATH) and goes on, as the CLI does.
A base URL given by argument or WITHRUNTIME_BASE_URL never starts anything.

These tests use the default address itself, 127.0.0.1:7878, with a private
HOME (so a fresh data dir). Something already listening there is not
touched: the test skips, and under CI (where the address must be free) it
fails, naming what holds it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import withruntime
from withruntime import _local

SDK_DIR = str(Path(__file__).resolve().parent.parent)
ADDR = ("127.0.0.1", 7878)


def _listening() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(ADDR) == 0


def _require_free_default_address() -> None:
    if not _listening():
        return
    why = "something already listens on 127.0.0.1:7878 (another daemon?): not touching it"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must have 127.0.0.1:7878 free for the daemon tests, but {why}")
    pytest.skip(why)


def _user_env(home: Path, path: str, **extra: str) -> dict[str, str]:
    """The environment of a user with nothing configured: a private HOME, no
    XDG directories, no server or key, no CLI named."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith("WITHRUNTIME_") and k not in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME", "PATH")
    }
    env.update(HOME=str(home), PATH=path, PYTHONPATH=SDK_DIR, **extra)
    return env


def _run_sdk(code: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _serve_pids(data_dir: str) -> list[int]:
    """The pids of the "serve" processes on data_dir."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if len(args) > 1 and args[1] == b"serve" and b"--data-dir" in args:
            i = args.index(b"--data-dir")
            if i + 1 < len(args) and args[i + 1] == data_dir.encode():
                pids.append(int(d))
    return pids


# -- no root needed: a fake CLI stands for the real one -------------------------


def _fake_cli(tmp_path: Path, script: str, where: str = "bin") -> tuple[Path, Path]:
    """A fake `withruntime` in tmp_path/where that records its arguments in
    a file, then runs script; the file and the CLI's path."""
    marker = tmp_path / f"{where}-args"
    cli = tmp_path / where / "withruntime"
    cli.parent.mkdir()
    cli.write_text(f'#!/bin/sh\necho "$@" >> {marker}\n{script}\n')
    cli.chmod(0o755)
    return marker, cli


def test_nothing_answers_runs_daemon_start(tmp_path: Path) -> None:
    _require_free_default_address()
    marker, cli = _fake_cli(tmp_path, 'echo "error: unavailable: the fake daemon fails" >&2; exit 1')
    env = _user_env(tmp_path / "home", f"{cli.parent}:/usr/bin:/bin")
    p = _run_sdk(
        """
        import withruntime
        try:
            withruntime.Sandbox.list()
        except withruntime.TransportError as e:
            print(e)
        """,
        env,
    )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert marker.read_text() == "daemon start\n", "the SDK did not run `withruntime daemon start` (found on PATH)"
    for want in ("connection refused", "daemon start", "the fake daemon fails"):
        assert want in out, f"got {out!r}, want it to contain {want!r}"


def test_a_base_url_never_starts_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker, cli = _fake_cli(tmp_path, "exit 1")
    monkeypatch.setenv("WITHRUNTIME_BINARY", str(cli))
    monkeypatch.delenv("WITHRUNTIME_API_KEY", raising=False)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    monkeypatch.delenv("WITHRUNTIME_BASE_URL", raising=False)
    with pytest.raises(withruntime.TransportError):
        withruntime.Sandbox.list(base_url=closed)
    # The default address given by hand is a base URL too.
    if not _listening():
        with pytest.raises(withruntime.TransportError):
            withruntime.Sandbox.list(base_url="http://127.0.0.1:7878")
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", closed)
    with pytest.raises(withruntime.TransportError):
        withruntime.Sandbox.list()
    assert not marker.exists(), f"ran the CLI although a base URL was given: {marker.read_text()!r}"


def test_no_cli_says_how_to_start_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WITHRUNTIME_BINARY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no withruntime there
    with pytest.raises(withruntime.TransportError) as ei:
        _local.start_daemon()
    msg = str(ei.value)
    for want in ("no withruntime CLI on PATH", "WITHRUNTIME_BINARY", "withruntime daemon start"):
        assert want in msg, f"got {msg!r}, want it to contain {want!r}"


def test_a_failing_cli_is_a_transport_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, cli = _fake_cli(tmp_path, 'echo "error: unavailable: nothing here" >&2; exit 1')
    monkeypatch.setenv("WITHRUNTIME_BINARY", str(cli))
    with pytest.raises(withruntime.TransportError, match="nothing here"):
        _local.start_daemon()
    _, cli2 = _fake_cli(tmp_path, 'echo "error: forbidden: 127.0.0.1:7878 is held by process 1 (x)" >&2; exit 1', "bin2")
    monkeypatch.setenv("WITHRUNTIME_BINARY", str(cli2))
    with pytest.raises(withruntime.APIError) as ei:
        _local.start_daemon()
    assert ei.value.code == "forbidden" and "is held by process 1" in str(ei.value)


# -- the real daemon ------------------------------------------------------------


def test_sdk_starts_the_local_daemon(tmp_path: Path) -> None:
    """Two programs with nothing configured start at once on a fresh data
    dir: one daemon starts, both work (one runs a real sandbox), and
    `withruntime daemon stop` stops it."""
    binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime")
    if not binary:
        pytest.skip("no withruntime binary on PATH (or WITHRUNTIME_BIN) to start the daemon with")
    if os.geteuid() != 0:
        pytest.skip("the local daemon runs sandboxes: it needs root")
    _require_free_default_address()
    # The CLI found on PATH, as a user has it.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "withruntime").symlink_to(os.path.abspath(binary))
    home = tmp_path / "home"
    home.mkdir()
    env = _user_env(home, f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    data_dir = str(home / ".local" / "share" / "withruntime")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bindir / "withruntime"), *args], env=env, text=True, capture_output=True, timeout=60)

    try:
        create = _run_sdk(
            """
            from withruntime import Sandbox
            with Sandbox.create(vcpus=1, memory_mib=1024, metadata={"test": "sdk-daemon-start"}) as sbx:
                print(sbx.exec("echo $((6 * 7))").stdout.strip())
            """,
            env,
        )
        # Two threads of one program at once share one start.
        listing = _run_sdk(
            """
            from concurrent.futures import ThreadPoolExecutor
            from withruntime import Sandbox
            with ThreadPoolExecutor(2) as pool:
                print([len(x) for x in pool.map(lambda _: Sandbox.list(), range(2))])
            """,
            env,
        )
        out, err = create.communicate(timeout=180)
        assert create.returncode == 0 and out.strip() == "42", f"create: exit {create.returncode}, {out!r} {err!r}"
        lout, lerr = listing.communicate(timeout=60)
        assert listing.returncode == 0, f"list: exit {listing.returncode}, {lout!r} {lerr!r}"
        pids = _serve_pids(data_dir)
        assert len(pids) == 1, f"serve processes on {data_dir}: got {pids}, want one"
        st = cli("daemon", "status")
        assert st.stdout.startswith("running\n"), f"daemon status: {st.stdout!r} {st.stderr!r}"
        # A program run later finds it running and starts nothing more.
        again = _run_sdk("from withruntime import Sandbox\nprint(len(Sandbox.list()))", env)
        aout, aerr = again.communicate(timeout=60)
        assert again.returncode == 0, aerr
        assert _serve_pids(data_dir) == pids
    finally:
        stop = cli("daemon", "stop")
        log = Path(data_dir, "daemon.log")
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        assert stop.returncode == 0, f"daemon stop: {stop.returncode} {stop.stderr!r}; daemon.log: {tail}"
    deadline = time.monotonic() + 10
    while _listening() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _listening(), "something still listens on 127.0.0.1:7878 after daemon stop"
