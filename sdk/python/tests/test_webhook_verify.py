"""The webhook verification snippet of the docs ("Verifying a webhook"), run
as written against a signature the server's signing makes (the same vector
is pinned in internal/webhooks' TestSignVector): it accepts that delivery,
and refuses one whose body, id, timestamp or secret differs, or that is too
old.
"""

from __future__ import annotations

import time

from readme import blocks

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"type":"sandbox.created"}'
TS = "1700000000"
SIGNATURE = "v1,emQol+O3w9E3+SNBfGK3kW0WOckDpI1JPvdscfvI6kQ="


def snippet():
    ns: dict = {}
    exec(blocks("Verifying a webhook")[0], ns)  # noqa: S102 - the docs' own code
    return ns["verify_webhook"]


def test_snippet_verifies(monkeypatch):
    verify = snippet()
    monkeypatch.setattr(time, "time", lambda: 1700000000 + 10)
    headers = {"webhook-id": "evt_1", "webhook-timestamp": TS, "webhook-signature": "v1,bm90IGl0 " + SIGNATURE}
    assert verify(SECRET, headers, BODY)
    assert not verify(SECRET, headers, b'{"type":"sandbox.ended"}')
    assert not verify(SECRET, {**headers, "webhook-id": "evt_2"}, BODY)
    assert not verify(SECRET, {**headers, "webhook-timestamp": "1700000001"}, BODY)
    assert not verify("whsec_" + "A" * 32, headers, BODY)
    monkeypatch.setattr(time, "time", lambda: 1700000000 + 3600)
    assert not verify(SECRET, headers, BODY)
