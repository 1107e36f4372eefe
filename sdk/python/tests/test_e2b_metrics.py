"""E2B's get_metrics, by E2B's own Python client (e2b 2.63.0, unmodified)
against the live server's --e2b-listen address: a sandbox that spins a CPU
and holds memory shows both in withruntime's samples, in E2B's shape."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conftest import wait_until

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402

pytestmark = pytest.mark.live


def test_get_metrics(e2b_env: dict[str, str], live_server: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    sbx = e2b.Sandbox.create(timeout=180, metadata={"test": "e2b-metrics"})
    try:
        sbx.commands.run(
            "python3 -c 'b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass'",
            background=True,
        )

        def busy() -> Any:
            for m in sbx.get_metrics():
                if m.cpu_used_pct >= 30 and m.mem_used >= 200 << 20:
                    return m
            return None

        with caplog.at_level(logging.WARNING):
            m = wait_until(busy, timeout=60, interval=1)
        assert m is not None, f"no sample shows the spinning CPU and 200 MiB: {sbx.get_metrics()}"
        # The layer's envd version is new enough for disk metrics: the
        # client warns below 0.2.4.
        assert "Disk metrics are not supported" not in caplog.text
        native = withruntime.Sandbox(sbx.sandbox_id, **live_server).info()
        assert m.cpu_count == native.vcpus
        assert 0 < m.cpu_used_pct <= 100
        assert m.mem_used <= m.mem_total and m.mem_total > 0
        assert 0 <= m.disk_used <= m.disk_total and m.disk_total > 0
        assert isinstance(m.timestamp, datetime) and m.timestamp.tzinfo is not None
        assert abs((m.timestamp - datetime.now(timezone.utc)).total_seconds()) < 120

        # The class method by id, and the bounds (whole seconds, as E2B
        # sends them): a window after the sample leaves it out, one around
        # it keeps it.
        ours = withruntime.Sandbox(sbx.sandbox_id, **live_server).get_metrics()
        assert any(o.timestamp is not None and abs((o.timestamp - m.timestamp).total_seconds()) < 1e-3 for o in ours)
        around = e2b.Sandbox.get_metrics(sbx.sandbox_id, start=m.timestamp - timedelta(seconds=1), end=m.timestamp)
        assert m in around, f"{m} not in {around}"
        later = sbx.get_metrics(start=m.timestamp + timedelta(seconds=2))
        assert all(x.timestamp > m.timestamp for x in later), later
    finally:
        sbx.kill()
    with pytest.raises(e2b.NotFoundException):
        e2b.Sandbox.get_metrics(sbx.sandbox_id)
