"""withruntime.Client: secrets, keys, usage, accounts and trials.

The unit tests check request shapes and error mapping against a canned
server; the tests marked live run the same calls against the real server.
"""

from __future__ import annotations

import socket
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from cannedserver import CannedServer
from conftest import SMALL, wait_until

import withruntime
from withruntime import APIError, Client, TransportError

NOW = "2026-01-02T03:04:05.123456789Z"
SECRET_VALUE = "s3cr3t-never-shown-4f1d"


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> Iterator[CannedServer]:
    srv = CannedServer()
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", srv.base_url)
    monkeypatch.setenv("WITHRUNTIME_API_KEY", "test-key")
    try:
        yield srv
    finally:
        srv.stop()


# -- request shapes ---------------------------------------------------------


def test_client_takes_env_and_arguments(canned: CannedServer) -> None:
    canned.answer("GET", "/v1/secrets", 200, {"secrets": []})
    Client().secrets.list()
    Client(api_key="other-key", base_url=canned.base_url + "/").secrets.list()
    got = [s.headers.get("authorization") for s in canned.sent]
    assert got == ["Bearer test-key", "Bearer other-key"], f"got {got}"


def test_secrets_set_list_remove(canned: CannedServer) -> None:
    info = {"name": "OPENAI_API_KEY", "host": "api.openai.com", "updated_at": NOW}
    canned.answer("PUT", "/v1/secrets/OPENAI_API_KEY", 200, info)
    canned.answer("GET", "/v1/secrets", 200, {"secrets": [info]})
    canned.answer("DELETE", "/v1/secrets/OPENAI_API_KEY", 204, None)
    c = Client()

    got = c.secrets.set("OPENAI_API_KEY", SECRET_VALUE, host="api.openai.com")
    want = withruntime.SecretInfo("OPENAI_API_KEY", "api.openai.com",
                                  datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc))
    assert got == want, f"got {got}, want {want}"
    assert SECRET_VALUE not in repr(got)
    assert c.secrets.list() == [want]
    assert c.secrets.remove("OPENAI_API_KEY") is None

    put, lst, rm = canned.sent
    assert (put.method, put.path) == ("PUT", "/v1/secrets/OPENAI_API_KEY")
    assert put.json() == {"value": SECRET_VALUE, "host": "api.openai.com"}, f"got {put.json()}"
    assert put.headers["content-type"] == "application/json"
    assert (lst.method, lst.path, rm.method, rm.path) == (
        "GET", "/v1/secrets", "DELETE", "/v1/secrets/OPENAI_API_KEY")


def test_secret_name_is_one_path_segment(canned: CannedServer) -> None:
    canned.answer("DELETE", "/v1/secrets/a%2Fb%20c", 204, None)
    Client().secrets.remove("a/b c")
    got = canned.sent[0].path
    assert got == "/v1/secrets/a%2Fb%20c", f"got {got}"


def test_empty_names_are_refused_before_sending(canned: CannedServer) -> None:
    c = Client()
    for call in (lambda: c.secrets.set("", "v", host="h.example"), lambda: c.secrets.remove(""),
                 lambda: c.keys.remove(""), lambda: c.accounts.create("")):
        with pytest.raises(ValueError):
            call()
    assert canned.sent == [], f"got requests {canned.sent}"


def test_keys_create_shapes(canned: CannedServer) -> None:
    key = {"id": "k1", "account": "team", "kind": "read_only", "name": "ci",
           "daily_limit_micros": 4350000, "created_at": NOW, "key": "wr_full_secret"}
    canned.answer("POST", "/v1/keys", 201, key)
    c = Client()
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({}, {}),
        ({"read_only": True, "account": "team", "name": "ci", "daily_limit_usd": 4.35},
         {"kind": "read_only", "account": "team", "name": "ci", "daily_limit_micros": 4350000}),
        ({"kind": "admin"}, {"kind": "admin"}),
        ({"kind": "full", "daily_limit_micros": 7}, {"kind": "full", "daily_limit_micros": 7}),
        ({"daily_limit_usd": "0.000001"}, {"daily_limit_micros": 1}),
        ({"format": "e2b", "read_only": True}, {"format": "e2b", "kind": "read_only"}),
        # The default format is not sent: servers from before formats refuse the field.
        ({"format": "withruntime"}, {}),
    ]
    for kwargs, want in cases:
        got_key = c.keys.create(**kwargs)
        body = canned.sent[-1].json()
        assert body == want, f"create({kwargs}): sent {body}, want {want}"
    assert got_key.secret == "wr_full_secret"
    assert got_key.kind == "read_only" and got_key.daily_limit_micros == 4350000
    assert "wr_full_secret" not in repr(got_key), f"repr shows the secret: {got_key!r}"


@pytest.mark.parametrize("kwargs", [
    {"daily_limit_usd": "1.0000001"},
    {"daily_limit_usd": "lots"},
    {"daily_limit_usd": 1, "daily_limit_micros": 1},
    {"kind": "root"},
    {"kind": "full", "read_only": True},
    {"format": "E2B"},
    {"format": "wr"},
])
def test_keys_create_refuses_bad_options(canned: CannedServer, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Client().keys.create(**kwargs)
    assert canned.sent == []


def test_keys_list_and_remove(canned: CannedServer) -> None:
    canned.answer("GET", "/v1/keys", 200, {"keys": [
        {"id": "k1", "account": "team", "kind": "full", "parent": "k0", "created_at": NOW}]})
    canned.answer("DELETE", "/v1/keys/k1", 204, None)
    c = Client()
    got = c.keys.list()
    assert [(k.id, k.account, k.kind, k.parent, k.secret) for k in got] == [("k1", "team", "full", "k0", "")]
    c.keys.list(account="team")
    c.keys.remove("k1")
    queries = [(s.method, s.path, s.query) for s in canned.sent]
    want = [("GET", "/v1/keys", {}), ("GET", "/v1/keys", {"account": ["team"]}), ("DELETE", "/v1/keys/k1", {})]
    assert queries == want, f"got {queries}, want {want}"


def test_usage_query_and_rows(canned: CannedServer) -> None:
    canned.answer("GET", "/v1/usage", 200, {"rows": [
        {"day": "2026-01-02", "account": "team", "key_id": "k1", "sandbox_hours": 0.5,
         "cpu_hours": 0.25, "memory_gib_hours": 2.0, "cost_micros": 15625}], "cost_micros": 15625})
    c = Client()
    u = c.usage()
    want = withruntime.UsageRow("2026-01-02", "team", "k1", 0.5, 0.25, 2.0, 15625)
    assert u.rows == [want] and u.cost_micros == 15625, f"got {u}"
    late = datetime(2026, 1, 3, 1, 0, tzinfo=timezone(timedelta(hours=5)))  # 2026-01-02 in UTC
    c.usage(from_=date(2026, 1, 1), to=late, account="team", key="k1")
    c.usage(from_="2026-01-01")
    got = [s.query for s in canned.sent]
    want_q = [{}, {"from": ["2026-01-01"], "to": ["2026-01-02"], "account": ["team"], "key": ["k1"]},
              {"from": ["2026-01-01"]}]
    assert got == want_q, f"got {got}, want {want_q}"


def test_accounts_create_and_list(canned: CannedServer) -> None:
    acct = {"id": "team", "name": "team", "concurrency": 3, "trial_hours": 2, "created_at": NOW}
    canned.answer("POST", "/v1/accounts", 201, acct)
    canned.answer("GET", "/v1/accounts", 200, {"accounts": [acct]})
    c = Client()
    got = c.accounts.create("team", concurrency=3, trial_hours=2)
    assert (got.id, got.concurrency, got.trial_hours) == ("team", 3, 2.0), f"got {got}"
    c.accounts.create("solo")
    assert [a.id for a in c.accounts.list()] == ["team"]
    bodies = [s.json() for s in canned.sent if s.method == "POST"]
    want = [{"name": "team", "concurrency": 3, "trial_hours": 2.0}, {"name": "solo"}]
    assert bodies == want, f"got {bodies}, want {want}"


def test_trial_sends_no_key(canned: CannedServer) -> None:
    canned.answer("POST", "/v1/trial", 201, {"account": "trial-1", "key": "wr_trial_secret", "trial_hours": 50})
    t = Client().trial()
    assert (t.account, t.key, t.trial_hours) == ("trial-1", "wr_trial_secret", 50.0)
    assert "wr_trial_secret" not in repr(t)
    got = canned.sent[0].headers.get("authorization")
    assert got is None, f"trial sent Authorization {got!r}"


# -- error mapping ------------------------------------------------------------


@pytest.mark.parametrize("method, path, status, code, call", [
    ("POST", "/v1/keys", 403, "forbidden", lambda c: c.keys.create()),
    ("GET", "/v1/accounts", 403, "forbidden", lambda c: c.accounts.list()),
    ("POST", "/v1/accounts", 409, "conflict", lambda c: c.accounts.create("team")),
    ("PUT", "/v1/secrets/X", 422, "not_supported", lambda c: c.secrets.set("X", SECRET_VALUE, host="h.example")),
    ("DELETE", "/v1/secrets/X", 404, "not_found", lambda c: c.secrets.remove("X")),
    ("GET", "/v1/usage", 400, "invalid_request", lambda c: c.usage(from_="01/02/2026")),
    ("DELETE", "/v1/keys/k1", 409, "conflict", lambda c: c.keys.remove("k1")),
    ("GET", "/v1/secrets", 401, "unauthorized", lambda c: c.secrets.list()),
])
def test_errors_carry_the_servers_code(canned: CannedServer, method: str, path: str, status: int,
                                       code: str, call: Any) -> None:
    canned.error(method, path, status, code, "refused for the test")
    with pytest.raises(APIError) as ei:
        call(Client())
    e = ei.value
    assert (e.code, e.status, e.message) == (code, status, "refused for the test"), f"got {e!r}"
    assert SECRET_VALUE not in str(e)


def test_error_without_json_body_gets_a_code_from_its_status(canned: CannedServer) -> None:
    canned.answer("GET", "/v1/accounts", 403, b"denied by a proxy")
    with pytest.raises(APIError) as ei:
        Client().accounts.list()
    assert (ei.value.code, ei.value.status) == ("forbidden", 403), f"got {ei.value!r}"


def test_unreachable_server_is_transport_error_without_the_value() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = Client(api_key="k", base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError) as ei:
        c.secrets.set("X", SECRET_VALUE, host="h.example")
    assert "withruntime serve" in str(ei.value), f"got {ei.value}"
    assert SECRET_VALUE not in str(ei.value)


# -- live ---------------------------------------------------------------------


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.live
def test_live_secret_is_listed_without_its_value(live_server: dict[str, str]) -> None:
    c = Client(**live_server)
    name = "WR_PY_" + uuid.uuid4().hex[:8].upper()
    info = c.secrets.set(name, SECRET_VALUE, host="api.example.com")
    try:
        assert (info.name, info.host) == (name, "api.example.com"), f"got {info}"
        assert info.updated_at is not None
        listed = {s.name: s for s in c.secrets.list()}
        assert listed.get(name) == info, f"got {listed.get(name)}, want {info}"
        # Nothing in the raw answer carries the value either.
        req = urllib.request.Request(live_server["base_url"] + "/v1/secrets",
                                     headers={"Authorization": "Bearer " + live_server["api_key"]})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read().decode()
        assert name in raw and SECRET_VALUE not in raw, f"got {raw}"
    finally:
        c.secrets.remove(name)
    assert name not in {s.name for s in c.secrets.list()}
    with pytest.raises(APIError) as ei:
        c.secrets.remove(name)
    assert ei.value.code == "not_found", f"got {ei.value!r}"


@pytest.mark.live
def test_live_read_only_key_is_refused_on_create(live_server: dict[str, str]) -> None:
    admin = Client(**live_server)
    name = _unique("py-ro")
    key = admin.keys.create(read_only=True, name=name)
    try:
        assert key.secret and key.kind == "read_only" and key.name == name, f"got {key}"
        listed = [k for k in admin.keys.list() if k.id == key.id]
        assert len(listed) == 1 and listed[0].secret == "", f"got {listed}"
        ro = Client(api_key=key.secret, base_url=live_server["base_url"])
        assert ro.secrets.list() is not None  # reading is allowed
        with pytest.raises(APIError) as ei:
            ro.keys.create()
        assert ei.value.code == "forbidden", f"keys.create: got {ei.value!r}"
        with pytest.raises(APIError) as ei:
            withruntime.Sandbox.create(api_key=key.secret, base_url=live_server["base_url"], **SMALL)
        assert ei.value.code == "forbidden", f"Sandbox.create: got {ei.value!r}"
    finally:
        admin.keys.remove(key.id)
    with pytest.raises(APIError) as ei:
        Client(api_key=key.secret, base_url=live_server["base_url"]).secrets.list()
    assert ei.value.code == "unauthorized", f"removed key: got {ei.value!r}"


@pytest.mark.live
def test_live_usage_has_rows_after_a_short_sandbox(live_server: dict[str, str]) -> None:
    admin = Client(**live_server)
    key = admin.keys.create(name=_unique("py-usage"), daily_limit_usd="1.5")
    try:
        assert key.daily_limit_micros == 1_500_000, f"got {key}"
        with withruntime.Sandbox.create(api_key=key.secret, base_url=live_server["base_url"],
                                        timeout_seconds=120, metadata={"test": "sdk-python-usage"},
                                        **SMALL) as sbx:
            sbx.exec("true", check=True)
        today = datetime.now(timezone.utc).date()

        def rows() -> list[withruntime.UsageRow]:
            return admin.usage(key=key.id, from_=today - timedelta(days=1), to=today + timedelta(days=1)).rows

        got = wait_until(lambda: [r for r in rows() if r.sandbox_hours > 0], timeout=30)
        assert got, f"no usage rows for key {key.id}: {rows()}"
        assert all(r.key_id == key.id for r in got), f"got {got}"
        assert got[0].memory_gib_hours > 0 and got[0].cost_micros >= 0, f"got {got}"
        # The key sees its own account's usage too.
        mine = Client(api_key=key.secret, base_url=live_server["base_url"]).usage(key=key.id)
        assert any(r.key_id == key.id for r in mine.rows), f"got {mine}"
        with pytest.raises(APIError) as ei:
            admin.usage(from_="yesterday")
        assert ei.value.code == "invalid_request", f"got {ei.value!r}"
    finally:
        admin.keys.remove(key.id)


@pytest.mark.live
def test_live_accounts_create_and_list(live_server: dict[str, str]) -> None:
    admin = Client(**live_server)
    name = _unique("py-acct")
    a = admin.accounts.create(name, concurrency=3, trial_hours=2)
    assert (a.id, a.name, a.concurrency, a.trial_hours) == (name, name, 3, 2.0), f"got {a}"
    listed = {x.id: x for x in admin.accounts.list()}
    assert name in listed and listed[name].concurrency == 3, f"got {sorted(listed)}"
    with pytest.raises(APIError) as ei:
        admin.accounts.create(name)
    assert ei.value.code == "conflict", f"got {ei.value!r}"
    # A full key of that account manages neither accounts nor other accounts' keys.
    k = admin.keys.create(account=name, name="py-acct-key")
    try:
        assert k.account == name, f"got {k}"
        user = Client(api_key=k.secret, base_url=live_server["base_url"])
        for call in (user.accounts.list, lambda: user.accounts.create(_unique("py-no")),
                     lambda: user.keys.create(account="someone-else")):
            with pytest.raises(APIError) as ei:
                call()
            assert ei.value.code == "forbidden", f"got {ei.value!r}"
        assert [x.id for x in user.keys.list()] == [k.id]
    finally:
        admin.keys.remove(k.id)
