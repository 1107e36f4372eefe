"""The unmodified e2b SDK's sandbox.commands against withruntime's E2B API:
envd's process service on port 49983, over a real sandbox. Commands run as
withruntime background processes, so a stream that ends (a timeout, a
disconnect) leaves its command running, and connect(pid) reattaches."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

from e2b.exceptions import NotFoundException, TimeoutException  # noqa: E402
from e2b.sandbox.commands.command_handle import CommandExitException  # noqa: E402

from conftest import wait_until  # noqa: E402


@pytest.fixture(scope="module")
def sbx(e2b_env: Any) -> Iterator[Any]:
    """One E2B sandbox for the module, killed at the end."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in dict(e2b_env).items():
            mp.setenv(k, v)
        s = e2b.Sandbox.create(timeout=600, metadata={"test": "e2b-commands"}, envs={"FROM_CREATE": "c1"})
        try:
            yield s
        finally:
            s.kill()


def test_run_foreground_streams_both(sbx: Any) -> None:
    out: list[str] = []
    err: list[str] = []
    res = sbx.commands.run("echo one; echo two >&2; echo three", on_stdout=out.append, on_stderr=err.append)
    assert res.exit_code == 0
    assert res.stdout == "one\nthree\n"
    assert res.stderr == "two\n"
    assert "".join(out) == "one\nthree\n"
    assert "".join(err) == "two\n"


def test_nonzero_exit_raises_with_output(sbx: Any) -> None:
    with pytest.raises(CommandExitException) as ei:
        sbx.commands.run("echo partial; echo bad >&2; exit 7")
    assert ei.value.exit_code == 7
    assert ei.value.stdout == "partial\n"
    assert ei.value.stderr == "bad\n"
    assert "7" in ei.value.error


def test_envs_cwd_and_default_user(sbx: Any) -> None:
    res = sbx.commands.run('echo "$GREETING $FROM_CREATE"; pwd; id -u; echo $HOME', envs={"GREETING": "hello"})
    assert res.stdout.splitlines() == ["hello c1", "/home/user", "1000", "/home/user"]
    sbx.commands.run("mkdir -p /tmp/e2b-cwd")
    assert sbx.commands.run("pwd", cwd="/tmp/e2b-cwd").stdout == "/tmp/e2b-cwd\n"


def test_as_root(sbx: Any) -> None:
    res = sbx.commands.run("id -u; echo $HOME; pwd; touch /root/made-by-root", user="root")
    assert res.stdout.splitlines() == ["0", "/root", "/root"]
    assert sbx.commands.run("stat -c %u /root/made-by-root", user="root").stdout == "0\n"


def test_background_wait_and_list(sbx: Any) -> None:
    h = sbx.commands.run("echo started; sleep 1; echo done", background=True)
    assert h.pid > 0
    assert h.pid in [p.pid for p in sbx.commands.list()]
    listed = next(p for p in sbx.commands.list() if p.pid == h.pid)
    assert listed.cmd == "/bin/bash" and listed.args[-1] == "echo started; sleep 1; echo done"
    res = h.wait()
    assert (res.exit_code, res.stdout) == (0, "started\ndone\n")
    assert h.pid not in [p.pid for p in sbx.commands.list()]


def test_background_kill(sbx: Any) -> None:
    h = sbx.commands.run("sleep 300", background=True)
    assert h.kill() is True
    with pytest.raises(CommandExitException) as ei:
        h.wait()
    assert ei.value.exit_code != 0
    # Gone: killing again answers False (not_found).
    assert sbx.commands.kill(h.pid) is False
    assert sbx.commands.kill(999999) is False


def test_send_stdin_and_close(sbx: Any) -> None:
    h = sbx.commands.run("while read -r l; do echo got:$l; done; echo eof", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "one\n")
    h.send_stdin("two\n")
    sbx.commands.close_stdin(h.pid)
    res = h.wait()
    assert res.stdout == "got:one\ngot:two\neof\n"


def test_stream_input(sbx: Any) -> None:
    h = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.stream_input(h.pid, iter(["a", b"b\n", "c\n"]))
    sbx.commands.close_stdin(h.pid)
    assert h.wait().stdout == "ab\nc\n"
    with pytest.raises(NotFoundException):
        sbx.commands.stream_input(999999, iter(["x"]))


def test_connect_by_pid(sbx: Any) -> None:
    h = sbx.commands.run("echo before; read -r l; echo after:$l", background=True, stdin=True)
    wait_until(lambda: h.pid in [p.pid for p in sbx.commands.list()])
    h.disconnect()
    # Disconnecting never ends the command: it still runs, and reattaching
    # gives its kept output, then the live rest.
    assert h.pid in [p.pid for p in sbx.commands.list()]
    again = sbx.commands.connect(h.pid)
    assert again.pid == h.pid
    sbx.commands.send_stdin(h.pid, "x\n")
    res = again.wait()
    assert res.stdout == "before\nafter:x\n"
    with pytest.raises(NotFoundException):
        sbx.commands.connect(999999)


def test_timeout_leaves_the_command_running(sbx: Any) -> None:
    with pytest.raises(TimeoutException):
        sbx.commands.run("sleep 60; echo late", timeout=1)
    procs = wait_until(lambda: [p for p in sbx.commands.list() if p.args[-1] == "sleep 60; echo late"])
    assert len(procs) == 1
    assert sbx.commands.kill(procs[0].pid) is True
    # kill answers once the process has ended.
    assert procs[0].pid not in [p.pid for p in sbx.commands.list()]


def test_sandbox_killed_under_a_command(e2b_env: Any) -> None:
    # As on E2B, a command whose sandbox is killed under it ends with the
    # error that says the sandbox is gone (a TimeoutException), not with
    # an error about the command.
    s = e2b.Sandbox.create(timeout=120, metadata={"test": "e2b-commands"})
    try:
        cmd = s.commands.run("sleep 60", background=True)
    finally:
        s.kill()
    with pytest.raises(TimeoutException) as exc:
        cmd.wait()
    assert "killed or reached its end of life" in str(exc.value)
