"""Per-sandbox metrics: the samples of GET /v1/sandboxes/{id}/metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Union

from ._time import parse_time

# A bound of get_metrics: a datetime (naive ones are taken as UTC), or Unix
# seconds.
TimeBound = Union[datetime, int, float, None]


@dataclass(frozen=True)
class SandboxMetric:
    """One sample of a sandbox's resource use (the API's SandboxMetric),
    taken every 5 seconds while it runs.

    ``cpu_used_pct`` is the share of its ``cpu_count`` CPUs used since the
    sample before (0 to 100); memory and disk are used and total bytes;
    ``net_rx_bytes`` and ``net_tx_bytes`` count every byte received and sent
    since the sandbox started. Memory, disk and network are what the
    sandbox's own kernel reports: for watching, never for billing.
    ``cost_micros`` is the sandbox's cost so far (USD millionths) when the
    sample was taken, as its record and the usage ledger count it.
    """

    timestamp: datetime | None
    cpu_count: int = 0
    cpu_used_pct: float = 0.0
    mem_used_bytes: int = 0
    mem_total_bytes: int = 0
    disk_used_bytes: int = 0
    disk_total_bytes: int = 0
    net_rx_bytes: int = 0
    net_tx_bytes: int = 0
    cost_micros: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SandboxMetric:
        return cls(
            timestamp=parse_time(d.get("timestamp")),
            cpu_count=int(d.get("cpu_count") or 0),
            cpu_used_pct=float(d.get("cpu_used_pct") or 0),
            mem_used_bytes=int(d.get("mem_used_bytes") or 0),
            mem_total_bytes=int(d.get("mem_total_bytes") or 0),
            disk_used_bytes=int(d.get("disk_used_bytes") or 0),
            disk_total_bytes=int(d.get("disk_total_bytes") or 0),
            net_rx_bytes=int(d.get("net_rx_bytes") or 0),
            net_tx_bytes=int(d.get("net_tx_bytes") or 0),
            cost_micros=int(d.get("cost_micros") or 0),
        )


def time_param(value: TimeBound, name: str) -> str | None:
    """A bound as the API reads it (RFC 3339 in UTC), or None when open."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name}: want a datetime or Unix seconds, not {value!r}")
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, timezone.utc)
    if not isinstance(value, datetime):
        raise TypeError(f"{name}: want a datetime or Unix seconds, not {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
