"""E2B's snapshots and forks, driven by E2B's own Python client (e2b
2.63.0, unmodified) against the live server's --e2b-listen address:
create_snapshot, list_snapshots, Sandbox.create(snapshot_id),
Sandbox.fork and delete_snapshot map onto withruntime's snapshots, and a
process's memory goes on in every sandbox started from one."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402

pytestmark = pytest.mark.live

# A process whose state is in its memory only: a token drawn at start and
# a count it keeps raising, both written to /tmp/beat on each tick.
BEAT = ("python3 -u -c \"import os, time\nt = os.urandom(8).hex()\nn = 0\nwhile True:\n"
        "    n += 1\n    open('/tmp/beat.new', 'w').write('%s %d' % (t, n))\n"
        "    os.rename('/tmp/beat.new', '/tmp/beat')\n    time.sleep(0.05)\"")


def beat(sbx: Any) -> tuple[str, int]:
    """The process's token and count, once it has written them."""
    deadline = time.monotonic() + 20
    while True:
        out = sbx.commands.run("cat /tmp/beat 2>/dev/null || true").stdout.split()
        if len(out) == 2:
            return out[0], int(out[1])
        assert time.monotonic() < deadline, f"no beat in {sbx.sandbox_id}"
        time.sleep(0.1)


def goes_on(sbx: Any, token: str, after: int) -> None:
    """sbx runs the process that drew token, counting on past after."""
    deadline = time.monotonic() + 20
    while True:
        got, n = beat(sbx)
        assert got == token, f"{sbx.sandbox_id} runs another process: {got}, want {token}"
        if n > after:
            return
        assert time.monotonic() < deadline, f"{sbx.sandbox_id}'s process stopped at {n}"
        time.sleep(0.1)


def test_snapshot_create_from_it_fork_and_delete(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    src = e2b.Sandbox.create(timeout=300)
    made: list[Any] = []
    try:
        src.commands.run(BEAT, background=True)
        token, _ = beat(src)

        snap = src.create_snapshot(name="e2b-snap")
        assert snap.snapshot_id.startswith("snap_") and snap.names == ["e2b-snap"], snap
        ours = withruntime.Snapshot.get(snap.snapshot_id, **live_server)
        assert ours.sandbox_id == src.sandbox_id and ours.name == "e2b-snap"
        listed = e2b.Sandbox.list_snapshots(sandbox_id=src.sandbox_id).next_items()
        assert [s.snapshot_id for s in listed] == [snap.snapshot_id], listed
        assert e2b.Sandbox.list_snapshots(sandbox_id="sbx_other").next_items() == []
        with pytest.raises(e2b.SandboxException, match="memory: false"):
            src.create_snapshot(mode="filesystem")

        # Sandbox.create(snapshot_id) goes on from the snapshot.
        again = e2b.Sandbox.create(snap.snapshot_id, timeout=120)
        made.append(again)
        _, at = beat(src)
        goes_on(again, token, 0)

        forks = e2b.Sandbox.fork(src.sandbox_id, count=2, timeout=90)
        assert len(forks) == 2 and all(isinstance(f, e2b.Sandbox) for f in forks), forks
        made.extend(forks)
        boots = {src.commands.run("cat /proc/sys/kernel/random/boot_id").stdout}
        for f in forks:
            goes_on(f, token, at)
            f.files.write("/tmp/own", f.sandbox_id)
            boots.add(f.commands.run("cat /proc/sys/kernel/random/boot_id").stdout)
            # The fork's timeout is each fork's lease.
            lease = withruntime.Sandbox(f.sandbox_id, **live_server).info().lease_ends_at
            assert lease is not None and abs((lease - datetime.now(timezone.utc)).total_seconds() - 90) < 30, lease
        assert len(boots) == 3, boots
        assert [f.files.read("/tmp/own") for f in forks] == [f.sandbox_id for f in forks]
        assert src.commands.run("test -e /tmp/own || echo none").stdout == "none\n"
        goes_on(src, token, at)

        assert e2b.Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert e2b.Sandbox.delete_snapshot(snap.snapshot_id) is False
        with pytest.raises(withruntime.APIError) as e:
            withruntime.Snapshot.get(snap.snapshot_id, **live_server)
        assert e.value.code == "not_found"
        # The fork's own snapshot is gone once the forks run.
        assert e2b.Sandbox.list_snapshots(sandbox_id=src.sandbox_id).next_items() == []
    finally:
        for s in made:
            s.kill()
        src.kill()


def test_fork_refusals(e2b_env: dict[str, str]) -> None:
    src = e2b.Sandbox.create(timeout=120)
    try:
        with pytest.raises(e2b.SandboxException):
            e2b.Sandbox.fork(src.sandbox_id, count=17)
        with pytest.raises(e2b.SandboxException):
            e2b.Sandbox.fork("sbx0000000000000000", count=1)
        src.pause()
        with pytest.raises(e2b.SandboxException):
            e2b.Sandbox.fork(src.sandbox_id, count=1)
    finally:
        src.kill()
