"""Per-sandbox metrics: sbx.get_metrics().

The unit tests check the request (bounds as the API reads them) and the
parsing against a canned server; the live test runs a sandbox that spins a
CPU and holds memory, and waits until a sample shows both.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from cannedserver import CannedServer, canned  # noqa: F401 - a fixture
from conftest import wait_until

import withruntime
from withruntime import APIError, Sandbox, SandboxMetric

SID = "sbx-1"
BASE = f"/v1/sandboxes/{SID}"

SAMPLE = {
    "timestamp": "2026-12-04T21:00:05.123456789Z",
    "cpu_count": 2,
    "cpu_used_pct": 97.5,
    "mem_used_bytes": 300 << 20,
    "mem_total_bytes": 1 << 30,
    "disk_used_bytes": 64 << 20,
    "disk_total_bytes": 10 << 30,
    "net_rx_bytes": 1000,
    "net_tx_bytes": 2000,
    "cost_micros": 42,
}


@pytest.fixture
def box(canned: CannedServer) -> Sandbox:
    return Sandbox(SID, api_key="test-key", base_url=canned.base_url)


def test_get_metrics_parses(canned: CannedServer, box: Sandbox) -> None:
    canned.answer("GET", BASE + "/metrics", 200, {"metrics": [SAMPLE, {"timestamp": "2026-12-04T21:00:10Z", "cpu_count": 2}]})
    got = box.get_metrics()
    want = SandboxMetric(
        timestamp=datetime(2026, 12, 4, 21, 0, 5, 123456, tzinfo=timezone.utc),
        cpu_count=2,
        cpu_used_pct=97.5,
        mem_used_bytes=300 << 20,
        mem_total_bytes=1 << 30,
        disk_used_bytes=64 << 20,
        disk_total_bytes=10 << 30,
        net_rx_bytes=1000,
        net_tx_bytes=2000,
        cost_micros=42,
    )
    if len(got) != 2 or got[0] != want or got[1].cpu_used_pct != 0.0:
        pytest.fail(f"got {got}, want [{want}, a second sample]")
    sent = canned.sent[0]
    if sent.query != {} or sent.headers["authorization"] != "Bearer test-key":
        pytest.fail(f"an open range sent query {sent.query}, headers {sent.headers}")
    if "SandboxMetric" not in withruntime.__all__:
        pytest.fail("SandboxMetric is missing from withruntime.__all__")


def test_get_metrics_bounds(canned: CannedServer, box: Sandbox) -> None:
    canned.answer("GET", BASE + "/metrics", 200, {"metrics": []})
    plus2 = timezone(timedelta(hours=2))
    assert box.get_metrics(start=datetime(2026, 12, 4, 23, 0, 0, tzinfo=plus2), end=1796418000) == []
    assert box.get_metrics(end=datetime(2026, 12, 4, 21, 30)) == []
    want = [
        {"start": ["2026-12-04T21:00:00.000000Z"], "end": ["2026-12-04T21:00:00.000000Z"]},
        {"end": ["2026-12-04T21:30:00.000000Z"]},
    ]
    got = [s.query for s in canned.sent]
    if got != want:
        pytest.fail(f"sent queries {got}, want {want}")
    with pytest.raises(TypeError):
        box.get_metrics(start="yesterday")  # type: ignore[arg-type]


def test_get_metrics_not_found(canned: CannedServer, box: Sandbox) -> None:
    canned.error("GET", BASE + "/metrics", 404, "not_found", "no sandbox sbx-1")
    with pytest.raises(APIError) as e:
        box.get_metrics()
    if e.value.code != "not_found":
        pytest.fail(f"got code {e.value.code}, want not_found")


@pytest.mark.live
def test_get_metrics_live(live_sbx: Sandbox) -> None:
    """A sandbox spinning a CPU and holding 200 MiB shows both in a sample
    within its size; bounded reads keep to their bounds."""
    spin = live_sbx.exec(
        ["python3", "-c", "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"],
        background=True,
    )
    try:
        def busy() -> SandboxMetric | None:
            for m in live_sbx.get_metrics():
                if m.cpu_used_pct >= 30 and m.mem_used_bytes >= 200 << 20:
                    return m
            return None

        m = wait_until(busy, timeout=60, interval=1)
        if m is None:
            pytest.fail(f"no sample shows the spinning CPU and 200 MiB: {live_sbx.get_metrics()}")
        info = live_sbx.info()
        if m.cpu_count != info.vcpus or m.cpu_used_pct > 100 or not m.mem_used_bytes <= m.mem_total_bytes or m.disk_total_bytes <= 0:
            pytest.fail(f"sample {m} of a sandbox of {info.vcpus} CPUs")
        if m.timestamp is None or m.timestamp.tzinfo is None:
            pytest.fail(f"timestamp {m.timestamp!r}: want an aware datetime")
        # A bound after the sample leaves it out; one before keeps it.
        after = live_sbx.get_metrics(start=m.timestamp + timedelta(milliseconds=1))
        if any(x.timestamp is not None and x.timestamp <= m.timestamp for x in after):
            pytest.fail(f"start after {m.timestamp} gave {after}")
        before = live_sbx.get_metrics(end=m.timestamp.timestamp() + 1)
        if m not in before:
            pytest.fail(f"end after {m.timestamp} left the sample out: {before}")
    finally:
        spin.kill()
