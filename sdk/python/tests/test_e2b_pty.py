"""E2B's sandbox.pty with the unmodified SDK through --e2b-listen: a login
shell on a terminal of the asked size, input, resize, the exit code, kill;
and commands.run on a terminal of its own is refused nowhere."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.live

e2b = pytest.importorskip("e2b")
from e2b.sandbox.commands.command_handle import PtySize  # noqa: E402


@pytest.fixture(scope="module")
def sbx(e2b_env: dict[str, str]):
    s = e2b.Sandbox.create(timeout=300)
    yield s
    s.kill()


def test_pty_size_input_resize_exit(sbx) -> None:
    out = bytearray()
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    events = iter(h)

    def until(text: str) -> None:
        # Read the terminal until text shows, as a person watching it would.
        while text not in out.decode(errors="replace"):
            _, _, pty = next(events)
            if pty:
                out.extend(pty)

    sbx.pty.send_stdin(h.pid, b"stty size; tty\n")
    until("24 80")
    sbx.pty.resize(h.pid, PtySize(rows=40, cols=120))
    sbx.pty.send_stdin(h.pid, b"stty size\n")
    until("40 120")
    sbx.pty.send_stdin(h.pid, b"exit 3\n")
    with pytest.raises(e2b.CommandExitException) as ei:
        h.wait(on_pty=lambda b: out.extend(b))
    assert ei.value.exit_code == 3
    assert "/dev/pts/" in out.decode(errors="replace")


def test_pty_kill(sbx) -> None:
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    sbx.pty.send_stdin(h.pid, b"sleep 600\n")
    assert sbx.pty.kill(h.pid)
    with pytest.raises(e2b.CommandExitException):
        h.wait()
    assert not sbx.pty.kill(h.pid)
