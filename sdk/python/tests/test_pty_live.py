"""Terminals (sbx.pty) against a real server and sandbox (marked `live`)."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import wait_until

from withruntime import APIError, Sandbox

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]


class Screen:
    """What a terminal printed, collected from on_data."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._b = b""

    def __call__(self, data: bytes) -> None:
        assert isinstance(data, bytes)
        with self._lock:
            self._b += data

    def text(self) -> str:
        with self._lock:
            return self._b.decode("utf-8", "replace")

    def wait_for(self, want: str) -> None:
        if not wait_until(lambda: want in self.text(), timeout=30):
            pytest.fail(f"waited for {want!r}, the terminal shows {self.text()!r}")


def test_pty_shell(live_sbx: Sandbox) -> None:
    screen = Screen()
    term = live_sbx.pty.create(cols=100, rows=30, on_data=screen)
    term.send_input("stty size; echo term=$TERM\n")
    screen.wait_for("term=xterm-256color")
    assert "30 100" in screen.text()
    term.resize(cols=132, rows=43)
    term.send_input("stty size\n")
    screen.wait_for("43 132")
    term.send_input("python3 -q\n")
    screen.wait_for(">>> ")
    term.send_input("print(6*7)\n")
    screen.wait_for("42\r\n")
    term.send_input("exit()\n")
    term.send_input("echo py-$((1+2))\n")
    screen.wait_for("py-3")
    term.send_input("sleep 100; echo slept\n")
    time.sleep(1)
    term.send_input("\x03")  # Ctrl-C: sleep is interrupted
    term.send_input("echo back-$((4+5))\n")
    screen.wait_for("back-9")
    assert "\nslept" not in screen.text()

    # Let go and attach again: the kept output comes first.
    term.disconnect()
    again = Screen()
    term2 = live_sbx.pty.connect(term.pid, on_data=again)
    again.wait_for("back-9")
    term2.send_input("exit 3\n")
    assert term2.wait(timeout=30) == 3


def test_pty_command_kill_and_refusals(live_sbx: Sandbox) -> None:
    screen = Screen()
    term = live_sbx.pty.create(cmd=["sleep", "100"], on_data=screen)
    term.kill()
    assert term.wait(timeout=30) == 137

    missing = Screen()
    term = live_sbx.pty.create(cmd=["no-such-command-here"], on_data=missing)
    assert term.wait(timeout=30) == 127
    assert "not found" in missing.text()

    with pytest.raises(APIError) as e:
        live_sbx.pty.create(cols=0, rows=24)
    assert e.value.code == "invalid_request"

    proc = live_sbx.exec("sleep 30", background=True)
    with pytest.raises(APIError) as e:
        live_sbx.pty.connect(proc.pid)
    assert e.value.code == "conflict"
    proc.kill()
