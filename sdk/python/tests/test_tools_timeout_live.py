"""runtime_exec's per-call timeout against a real server (marked `live`):
a server started in the foreground comes back as timed_out at the
binding's timeout, and the background form the tool's description gives
the model returns at once and leaves the server running."""

from __future__ import annotations

import time

import pytest

from withruntime import Sandbox
from withruntime.tools import sandbox_tools

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

SERVE = "python3 -m http.server 8123 --bind 127.0.0.1"
PROBE = "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/').status)\""


def test_foreground_server_times_out_background_one_keeps_running(live_sbx: Sandbox) -> None:
    run = sandbox_tools(live_sbx, timeout_seconds=3)[0]

    out = run(command=SERVE)
    assert out["timed_out"] is True, out

    # The description's advice, as the model would follow it.
    assert "nohup" in (run.__doc__ or "")
    out = run(command=f"nohup {SERVE} > server.log 2>&1 &")
    # Not killed at the timeout: it returned with the shell's own exit.
    assert out["exit_code"] == 0 and out["timed_out"] is False, out

    for _ in range(50):
        out = run(command=PROBE)
        if out["exit_code"] == 0:
            break
        time.sleep(0.2)
    assert out["exit_code"] == 0 and out["stdout"] == "200\n", out
    run(command="pkill -f 'http.server 8123'")
