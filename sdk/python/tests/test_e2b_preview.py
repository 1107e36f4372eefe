"""E2B's get_host(port), unmodified SDK, through --e2b-listen: the host it
names reaches a server listening on the sandbox's loopback; a sandbox made
with allowPublicTraffic false needs its traffic access token."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

import pytest

from conftest import E2B_TEST_DOMAIN, E2B_URL_VAR, wait_until

pytestmark = pytest.mark.live

e2b = pytest.importorskip("e2b")

PAGE = "served-from-inside-e2b"


def _get(host: str, path: str = "/index.html", headers: dict[str, str] | None = None) -> tuple[int, str]:
    """GET path on the E2B listener with Host: host (no DNS for the test's
    domain: the request goes to the listener's address, as a wildcard
    record would send it)."""
    req = urllib.request.Request(os.environ[E2B_URL_VAR] + path, headers={"Host": host, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _wait_ok(host: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """The first 200 answer, or the last answer once the server had time to start."""
    return wait_until(lambda: (lambda r: r if r[0] == 200 else None)(_get(host, headers=headers))) or _get(host, headers=headers)


def _serve(sbx: "e2b.Sandbox") -> None:
    sbx.commands.run(f"mkdir -p /tmp/site && echo {PAGE} > /tmp/site/index.html")
    sbx.commands.run("cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1", background=True)


def test_get_host_public(e2b_env: dict[str, str]) -> None:
    sbx = e2b.Sandbox.create(timeout=300)
    try:
        _serve(sbx)
        host = sbx.get_host(8000)
        assert host == f"8000-{sbx.sandbox_id}.{E2B_TEST_DOMAIN}"
        # E2B's default: the sandbox's URLs are public.
        status, body = _wait_ok(host)
        assert status == 200 and PAGE in body
        # A port with nothing listening answers 502 at once.
        status, body = _get(sbx.get_host(8001))
        assert status == 502 and "bad_gateway" in body
    finally:
        sbx.kill()
    # After the sandbox ends: not found.
    status, _ = _get(host)
    assert status == 404


def test_get_host_private(e2b_env: dict[str, str]) -> None:
    sbx = e2b.Sandbox.create(timeout=300, network={"allow_public_traffic": False})
    other = e2b.Sandbox.create(timeout=300)
    try:
        _serve(sbx)
        host = sbx.get_host(8000)
        token = sbx.traffic_access_token
        assert token
        header = {"e2b-traffic-access-token": token}
        status, body = _wait_ok(host, header)
        assert status == 200 and PAGE in body
        assert _get(host)[0] == 401
        assert _get(host, headers={"e2b-traffic-access-token": other.traffic_access_token})[0] == 401
        # The E2B routing headers reach the same port.
        status, body = _get("localhost", headers={**header, "E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8000"})
        assert status == 200 and PAGE in body
    finally:
        sbx.kill()
        other.kill()
