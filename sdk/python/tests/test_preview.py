"""Preview URLs (sbx.get_host, preview_url, expose, revoke_previews)
against a real server and sandbox (marked `live`): python's http.server runs
in the sandbox on its 127.0.0.1:8000 and a real HTTP client reaches it
through the server."""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta

import pytest
from conftest import wait_until

from withruntime import APIError, Preview, Sandbox
from withruntime._transport import Transport
from withruntime.preview import PREVIEW_TOKEN_HEADER, PREVIEW_TOKEN_PARAM, host_of, url_of

live = pytest.mark.live

PAGE = "preview-page-42\n"
# The code of a port with nothing listening (502).
NOTHING_LISTENS = "bad_gateway"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _get(url: str, headers: dict[str, str] | None = None, opener: urllib.request.OpenerDirector | None = None) -> tuple[int, str, dict[str, str]]:
    """status, body and headers of a GET; error statuses are returned, not raised."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), dict(e.headers)


@pytest.fixture(scope="module")
def served(live_sbx: Sandbox) -> Iterator[Sandbox]:
    """live_sbx with http.server serving PAGE on its 127.0.0.1:8000."""
    live_sbx.exec("mkdir -p /tmp/www && printf 'preview-page-42\\n' > /tmp/www/index.html", check=True)
    server = live_sbx.exec(
        ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/www"], background=True
    )
    up = wait_until(
        lambda: live_sbx.exec("python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8000/')\"").exit_code == 0,
        timeout=30,
    )
    assert up, f"http.server did not start: {server.stderr}"
    yield live_sbx
    server.kill()


@live
def test_public(served: Sandbox) -> None:
    p = served.expose(8000, public=True)
    try:
        assert isinstance(p, Preview)
        assert p.public and p.port == 8000 and p.token == "" and p.expires_at is None
        assert p.path == f"/v1/sandboxes/{served.id}/ports/8000/"
        host = served.get_host(8000)
        base = urllib.parse.urlsplit(served._t.base_url)
        # The server of the tests has no preview domain: the API's form.
        assert host == f"{base.netloc}/v1/sandboxes/{served.id}/ports/8000"
        # No key, no token: open.
        status, body, _ = _get(f"http://{host}/index.html")
        assert (status, body) == (200, PAGE)
        # The URL to open is the plain one.
        assert served.preview_url(8000) == f"{served._t.base_url}{p.path}"
    finally:
        served.expose(8000, public=False)


@live
def test_private(served: Sandbox) -> None:
    p = served.expose(8000, public=False)
    assert not p.public and p.token.startswith("wrpt_") and p.expires_at is not None
    base_url = served._t.base_url
    bare = f"{base_url}/v1/sandboxes/{served.id}/ports/8000/index.html"
    status, body, _ = _get(bare)
    assert status in (401, 403), (status, body)
    assert PAGE not in body

    # The token as a header.
    status, body, _ = _get(bare, headers={PREVIEW_TOKEN_HEADER: p.token})
    assert (status, body) == (200, PAGE)
    # The API key.
    status, body, _ = _get(bare, headers={"Authorization": f"Bearer {served._t._api_key}"})
    assert (status, body) == (200, PAGE)

    url = served.preview_url(8000, expires_in=timedelta(minutes=10))
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert url.startswith(f"{base_url}/v1/sandboxes/{served.id}/ports/8000/?")
    assert list(q) == [PREVIEW_TOKEN_PARAM] and q[PREVIEW_TOKEN_PARAM][0].startswith("wrpt_")
    assert served._t._api_key not in url

    # The first visit: 303 to the URL without the token, and a cookie.
    status, _, headers = _get(url, opener=urllib.request.build_opener(_NoRedirect))
    assert status == 303
    assert PREVIEW_TOKEN_PARAM not in headers.get("Location", "")
    assert "HttpOnly" in headers.get("Set-Cookie", "")
    # A browser follows it with the cookie.
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    status, body, _ = _get(url, opener=browser)
    assert (status, body) == (200, PAGE)
    assert len(jar) >= 1
    status, body, _ = _get(f"{base_url}/v1/sandboxes/{served.id}/ports/8000/index.html", opener=browser)
    assert (status, body) == (200, PAGE)


@live
def test_revoke(served: Sandbox) -> None:
    served.expose(8000, public=False)
    url = served.preview_url(8000)
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert _get(url, opener=browser)[:2] == (200, PAGE)
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)[PREVIEW_TOKEN_PARAM][0]
    page = f"{served._t.base_url}/v1/sandboxes/{served.id}/ports/8000/index.html"

    served.revoke_previews()

    # The old signed URL: refused at once, no redirect and no cookie.
    status, _, headers = _get(url, opener=urllib.request.build_opener(_NoRedirect))
    assert status == 401 and "Set-Cookie" not in headers, (status, headers)
    # Followed as a new browser would: refused.
    fresh = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    status, body, _ = _get(url, opener=fresh)
    assert status in (401, 403), (status, body)
    assert PAGE not in body
    status, _, _ = _get(page, headers={PREVIEW_TOKEN_HEADER: token})
    assert status in (401, 403)
    # The cookie the old URL set is refused too.
    status, body, _ = _get(page, opener=browser)
    assert status in (401, 403), (status, body)
    # A new URL works.
    browser2 = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    assert _get(served.preview_url(8000), opener=browser2)[:2] == (200, PAGE)


@live
def test_refusals(served: Sandbox) -> None:
    with pytest.raises(ValueError):
        served.get_host(0)
    with pytest.raises(ValueError):
        served.expose(70000)
    with pytest.raises(ValueError):
        served.preview_url(8000, expires_in=0)
    # The server's bounds: 1 minute to 7 days.
    with pytest.raises(APIError) as e:
        served.preview_url(8000, expires_in=10)
    assert e.value.code == "invalid_request"
    # Nothing listens on 8001: 502, code unavailable.
    served.expose(8001, public=True)
    try:
        host = served.get_host(8001)
        status, body, _ = _get(f"http://{host}/")
        assert status == 502, (status, body)
        assert json.loads(body)["error"]["code"] == NOTHING_LISTENS, body
    finally:
        served.expose(8001, public=False)
    with pytest.raises(APIError) as e:
        Sandbox("sbx_nosuchsandbox", base_url=served._t.base_url, api_key=served._t._api_key).get_host(8000)
    assert e.value.code == "not_found"


def test_host_and_url_forms() -> None:
    """get_host and preview_url from a Preview, with and without the
    server's host form, on a base URL with a path prefix."""
    t = Transport("https://runtime.example.org:8443/prefix/", "k")
    path = "/v1/sandboxes/sbx_a/ports/8000/"
    private = Preview(port=8000, path=path, token="wrpt_a+b/c")
    assert host_of(t, private) == "runtime.example.org:8443/prefix/v1/sandboxes/sbx_a/ports/8000"
    assert url_of(t, private) == f"https://runtime.example.org:8443/prefix{path}?{PREVIEW_TOKEN_PARAM}=wrpt_a%2Bb%2Fc"
    public = Preview(port=8000, public=True, path=path)
    assert url_of(t, public) == f"https://runtime.example.org:8443/prefix{path}"
    hosted = Preview(port=8000, path=path, host="8000-sbx_a.preview.test", url="https://8000-sbx_a.preview.test/", token="wrpt_x")
    assert host_of(t, hosted) == "8000-sbx_a.preview.test"
    assert url_of(t, hosted) == f"https://8000-sbx_a.preview.test/?{PREVIEW_TOKEN_PARAM}=wrpt_x"
    p = Preview.from_json({"port": 3000, "public": False, "path": path, "host": "", "url": "", "token": "wrpt_y",
                           "expires_at": "2026-12-05T20:00:00Z"})
    assert p.port == 3000 and p.token == "wrpt_y" and p.expires_at is not None and p.expires_at.year == 2026
