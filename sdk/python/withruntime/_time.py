"""Parsing the API's RFC 3339 times (Go writes up to nanoseconds and 'Z')."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:?\d{2})?$"
)


def parse_time(value: Any) -> datetime | None:
    """A timezone-aware datetime, or None for a missing, zero or unreadable value."""
    if not value or not isinstance(value, str):
        return None
    m = _RE.match(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second, frac, zone = m.groups()
    if year == "0001" and month == "01" and day == "01":
        return None  # Go's zero time: unset
    micro = int((frac or "0")[:6].ljust(6, "0"))
    tz = timezone.utc
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz)
    except ValueError:
        return None
