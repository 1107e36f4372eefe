"""Keys in E2B's format, used by E2B's own Python client, unmodified, against
the live server's --e2b-listen address (tests marked `live`).

E2B's SDKs have checked keys before sending them: e2b 2.25 to 2.45 refuse a
key that is not "e2b_" and lowercase hex digits unless E2B_VALIDATE_API_KEY
is "false". These tests never set that variable: a key made with
`withruntime keys create --format e2b` must pass the check of whichever e2b
is imported (run this file with an e2b of those versions on PYTHONPATH to
exercise the check itself; see docs/TESTING.md), and work as any withruntime
key of its kind: a full key creates a sandbox and runs a command in it, a
read-only key cannot create, a removed key does nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from typing import Any, Iterator

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402
from withruntime.admin import Client  # noqa: E402

pytestmark = pytest.mark.live

# The rule of E2B's SDKs that check keys (e2b 2.25 to 2.45): "e2b_", then
# lowercase hex digits.
E2B_KEY_RULE = re.compile(r"\Ae2b_[0-9a-f]+\Z")


def _cli(live_server: dict[str, str], *args: str) -> str:
    """Runs the withruntime CLI against the live server; its stdout."""
    binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime")
    if not binary:
        pytest.skip("no withruntime binary on PATH (or WITHRUNTIME_BIN)")
    env = dict(os.environ, WITHRUNTIME_BASE_URL=live_server["base_url"], WITHRUNTIME_API_KEY=live_server["api_key"])
    done = subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"withruntime {' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def account(live_server: dict[str, str]) -> Iterator[str]:
    """An account of its own, so that what its keys see is only theirs."""
    name = "e2b-keys-" + uuid.uuid4().hex[:8]
    Client(**live_server).accounts.create(name)
    yield name


@pytest.fixture(scope="module")
def full_key(live_server: dict[str, str], account: str) -> Iterator[dict[str, Any]]:
    """A full key of the account in E2B's format, made with the CLI."""
    key = json.loads(_cli(live_server, "keys", "create", "--format", "e2b", "--account", account,
                          "--name", "e2b-full", "--json"))
    try:
        yield key
    finally:
        try:
            Client(**live_server).keys.remove(key["id"])
        except withruntime.Error:
            pass  # A test removed it.


@pytest.fixture(scope="module")
def read_only_key(live_server: dict[str, str], account: str) -> Iterator[str]:
    """A read-only key of the account in E2B's format, made with the SDK."""
    admin = Client(**live_server)
    key = admin.keys.create(read_only=True, account=account, format="e2b")
    try:
        yield key.secret
    finally:
        admin.keys.remove(key.id)


def test_the_keys_have_e2bs_shape(full_key: dict[str, Any], read_only_key: str, account: str) -> None:
    assert os.environ.get("E2B_VALIDATE_API_KEY") is None, "the tests must run with E2B's default key check"
    for secret in (full_key["key"], read_only_key):
        assert E2B_KEY_RULE.match(secret), secret
        assert len(secret) == len("e2b_") + 64
    # The CLI's record is an ordinary key's.
    assert full_key["kind"] == "full" and full_key["account"] == account and full_key["name"] == "e2b-full"


def test_full_key_creates_and_runs(e2b_env: dict[str, str], full_key: dict[str, Any],
                                   live_server: dict[str, str], account: str) -> None:
    sbx = e2b.Sandbox.create(api_key=full_key["key"], timeout=120, metadata={"test": "e2b-keys"})
    try:
        r = sbx.commands.run("echo made with an e2b key")
        assert r.exit_code == 0 and r.stdout == "made with an e2b key\n"
        # It is a withruntime sandbox of the key's account.
        mine = withruntime.Sandbox.list(base_url=live_server["base_url"], api_key=full_key["key"])
        assert [s.id for s in mine if s.state == "running"] == [sbx.sandbox_id]
        listed = e2b.Sandbox.list(api_key=full_key["key"]).next_items()
        assert [s.sandbox_id for s in listed] == [sbx.sandbox_id]
    finally:
        sbx.kill()


def test_read_only_key_cannot_create(e2b_env: dict[str, str], read_only_key: str) -> None:
    # It reads: the account's sandboxes (none running).
    e2b.Sandbox.list(api_key=read_only_key).next_items()
    with pytest.raises(e2b.SandboxException, match="403"):
        e2b.Sandbox.create(api_key=read_only_key, timeout=60)


def test_removed_key_does_nothing(e2b_env: dict[str, str], live_server: dict[str, str], account: str) -> None:
    admin = Client(**live_server)
    key = admin.keys.create(account=account, format="e2b", name="e2b-removed")
    assert any(k.id == key.id for k in admin.keys.list(account=account))
    e2b.Sandbox.list(api_key=key.secret).next_items()
    admin.keys.remove(key.id)
    with pytest.raises(e2b.AuthenticationException):
        e2b.Sandbox.list(api_key=key.secret).next_items()


def test_what_the_imported_client_checks(e2b_env: dict[str, str], live_server: dict[str, str], account: str) -> None:
    """A withruntime-format key of the same account: an e2b that checks keys
    refuses it before sending anything (which is why E2B programs get an
    e2b-format key), one that does not (e2b 2.63) gets the server's answer.
    Either way the e2b-format keys above passed the imported client."""
    admin = Client(**live_server)
    key = admin.keys.create(account=account, name="wr-format")
    try:
        try:
            e2b.Sandbox.list(api_key=key.secret).next_items()
            checks = False
        except e2b.AuthenticationException as e:
            assert "Invalid API key format" in str(e), e
            checks = True
        print(f"e2b {getattr(e2b, '__file__', '')}: checks key format: {checks}")
    finally:
        admin.keys.remove(key.id)
