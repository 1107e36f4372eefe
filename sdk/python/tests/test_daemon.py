"""The local daemon's key and the message when no server answers.

Clients of the default address with no key read the local daemon's admin key
from $XDG_DATA_HOME/withruntime/admin.key; one that reaches no server says how
to start one. (The daemon itself is tested end to end in test/e2e.)
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import withruntime
from withruntime import _local
from withruntime._transport import resolve_config


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("WITHRUNTIME_BASE_URL", raising=False)
    monkeypatch.delenv("WITHRUNTIME_API_KEY", raising=False)
    d = tmp_path / "withruntime"
    d.mkdir()
    (d / "admin.key").write_text("wr_local_admin\n")
    return tmp_path


def test_default_address_reads_the_admin_key(data_home: Path) -> None:
    got = resolve_config(None, None)
    assert got == ("http://127.0.0.1:7878", "wr_local_admin"), f"got {got}"


@pytest.mark.parametrize(
    "base_url, api_key, env_key, want",
    [
        ("http://127.0.0.1:7878/", None, None, "wr_local_admin"),
        ("http://127.0.0.1:9999", None, None, None),  # not the daemon's address
        ("https://runtime.example.org", None, None, None),
        (None, None, "wr_env", "wr_env"),  # WITHRUNTIME_API_KEY wins
        (None, "wr_arg", None, "wr_arg"),  # so does api_key=
        (None, "", None, None),  # api_key="" asks for no key at all
    ],
)
def test_key_discovery(
    data_home: Path, monkeypatch: pytest.MonkeyPatch, base_url: str | None, api_key: str | None,
    env_key: str | None, want: str | None,
) -> None:
    if env_key:
        monkeypatch.setenv("WITHRUNTIME_API_KEY", env_key)
    _, key = resolve_config(base_url, api_key)
    assert key == want, f"got {key!r}, want {want!r}"


def test_unreadable_key_is_no_key(data_home: Path) -> None:
    (data_home / "withruntime" / "admin.key").unlink()
    assert resolve_config(None, None)[1] is None


def test_data_dir_defaults_to_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for v in ("", "relative/dir"):
        monkeypatch.setenv("XDG_DATA_HOME", v)
        got = _local.data_dir()
        assert got == os.path.join(str(tmp_path), ".local", "share", "withruntime"), f"XDG_DATA_HOME={v!r}: got {got}"


def test_no_server_says_how_to_start_one(data_home: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(withruntime.TransportError) as ei:
        withruntime.Sandbox.create(base_url=f"http://127.0.0.1:{port}")
    msg = str(ei.value)
    for want in ("withruntime serve", "withruntime daemon start", "withruntime sandbox ls"):
        assert want in msg, f"got {msg!r}, want it to mention {want!r}"
