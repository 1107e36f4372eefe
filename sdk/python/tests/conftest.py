"""Fixtures: an in-process fake server for the unit tests, and a live
server (from WITHRUNTIME_BASE_URL and WITHRUNTIME_API_KEY) for the tests
marked `live`.

The live tests are skipped, with the reason said, when those variables are
not set: the test session does not start a server of its own yet (the
maintainers wire that later, then export the two variables before pytest).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeserver import FakeServer  # noqa: E402

import withruntime  # noqa: E402


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """A fake server; the environment points the SDK at it."""
    srv = FakeServer()
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", srv.base_url)
    monkeypatch.setenv("WITHRUNTIME_API_KEY", srv.state.api_key or "")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def sbx(fake: FakeServer) -> withruntime.Sandbox:
    """A sandbox on the fake server."""
    return withruntime.Sandbox.create()


LIVE_VARS = ("WITHRUNTIME_BASE_URL", "WITHRUNTIME_API_KEY")


def _live_missing() -> list[str]:
    return [v for v in LIVE_VARS if not os.environ.get(v)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = _live_missing()
    if not missing:
        return
    skip = pytest.mark.skip(
        reason=f"live test: set {' and '.join(missing)} to a running withruntime server "
        "(the test session does not start one yet)"
    )
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def live_sbx() -> Iterator[withruntime.Sandbox]:
    """One real sandbox per test module, stopped at the end."""
    with withruntime.Sandbox.create(timeout_seconds=900, metadata={"test": "sdk-python"}) as s:
        yield s
