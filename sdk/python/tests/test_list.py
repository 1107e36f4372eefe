"""Sandbox.list: newest first, filtered by state and metadata, every page."""

from __future__ import annotations

import pytest
from conftest import SMALL

from withruntime import Sandbox


def test_list_sends_filters(fake) -> None:
    Sandbox.list(state=["running", "paused"], metadata={"task": "x y", "a": "1"}, all=True)
    lists = [r for r in fake.state.requests if r.method == "GET" and r.path.startswith("/v1/sandboxes")]
    assert lists, fake.state.requests
    q = lists[-1].query  # the fake keeps one value per name: the live test checks several metadata pairs
    assert q["state"] == "running,paused"
    assert q["all"] == "true"
    assert q["metadata"] in ("a=1", "task=x y")


@pytest.mark.live
@pytest.mark.usefixtures("live_server")
def test_live_list_filters() -> None:
    tag = {"suite": "test_list"}
    a = Sandbox.create(metadata={**tag, "task": "a"}, **SMALL)
    b = Sandbox.create(metadata={**tag, "task": "b"}, **SMALL)
    try:
        b.pause()
        assert [s.id for s in Sandbox.list(metadata=tag)] == [b.id, a.id]
        assert [s.id for s in Sandbox.list(metadata={**tag, "task": "a"})] == [a.id]
        assert [s.id for s in Sandbox.list(state="paused", metadata=tag)] == [b.id]
        assert [s.id for s in Sandbox.list(state=["running"], metadata=tag)] == [a.id]
    finally:
        a.stop()
        b.stop()
