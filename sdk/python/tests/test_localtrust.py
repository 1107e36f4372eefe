"""Who receives the local daemon's admin key.

While no daemon runs, any local user can listen on the default address. The
key read from $XDG_DATA_HOME/withruntime/admin.key goes only to a listener of
the key file's owner (the kernel's socket table says whose it is); another
user's listener gets no request with the key, and the error names its
process and user. A key the caller set goes wherever the caller said.
"""

from __future__ import annotations

import ast
import os
import select
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import withruntime
from withruntime import _local, _transport

NOBODY = 65534


class ForeignListener:
    """An HTTP server on a loopback port whose socket belongs to uid: a forked
    child that drops to uid before it listens, answers every request with 200
    and reports each Authorization header through a pipe."""

    def __init__(self, uid: int) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                s.listen(16)
                os.write(w, f"listening {s.getsockname()[1]}\n".encode())
                body = b'{"status":"ok","sandboxes":[]}'
                while True:
                    c, _ = s.accept()
                    head = b""
                    while b"\r\n\r\n" not in head and len(head) < 65536:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        head += chunk
                    auth = ""
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"authorization":
                            auth = value.strip().decode()
                    os.write(w, f"auth {auth!r}\n".encode())
                    c.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
                    )
                    c.close()
            finally:
                os._exit(1)
        os.close(w)
        self.pid, self._r, self._buf = pid, r, b""
        line = self._line(10.0)
        assert line and line.startswith("listening "), f"listener: got {line!r}"
        self.addr = f"127.0.0.1:{line.split()[1]}"
        self.url = f"http://{self.addr}"
        self.auth: list[str] = []

    def _line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                return None
            chunk = os.read(self._r, 4096)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def keyed(self) -> list[str]:
        """The Authorization headers that were not empty, so far."""
        while (line := self._line(0.05)) is not None:
            self.auth.append(ast.literal_eval(line.removeprefix("auth ")))
        return [a for a in self.auth if a]

    def close(self) -> None:
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self._r)


@pytest.fixture
def foreign() -> Iterator[ForeignListener]:
    if os.geteuid() != 0:
        pytest.skip("needs root: starts a listener as another user")
    if not sys.platform.startswith("linux"):
        pytest.skip("the listener check reads Linux's /proc/net/tcp")
    listener = ForeignListener(NOBODY)
    yield listener
    listener.close()


def _use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, key_owner: int) -> None:
    """The local daemon's address is url; its key file is owned by key_owner."""
    monkeypatch.setattr(_local, "DEFAULT_BASE_URL", url)
    monkeypatch.setattr(_transport, "DEFAULT_BASE_URL", url)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("WITHRUNTIME_BASE_URL", raising=False)
    monkeypatch.delenv("WITHRUNTIME_API_KEY", raising=False)
    d = tmp_path / "withruntime"
    d.mkdir(mode=0o700)
    key = d / "admin.key"
    key.write_text("wr_local_admin\n")
    key.chmod(0o600)
    os.chown(key, key_owner, key_owner)


def test_another_users_listener_gets_no_key(
    foreign: ForeignListener, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _use(monkeypatch, tmp_path, foreign.url, 0)
    with pytest.raises(withruntime.APIError) as ei:
        withruntime.Sandbox.list()
    msg = str(ei.value)
    assert ei.value.code == "forbidden", f"got {ei.value.code!r}, want forbidden"
    for want in (
        f"{foreign.addr} is held by process {foreign.pid} (",
        "of user nobody (uid 65534)",
        "not by the local daemon of user root (uid 0)",
        "refusing to send it the local admin key",
    ):
        assert want in msg, f"got {msg!r}, want it to contain {want!r}"
    assert foreign.keyed() == [], f"the listener got {foreign.keyed()}, want no key"


@pytest.mark.parametrize(
    "key_owner, env_key, want",
    [
        (NOBODY, None, ["Bearer wr_local_admin"]),  # the key owner's listener
        (0, "wr_env", ["Bearer wr_env"]),  # a key the user set goes where the user said
    ],
)
def test_key_goes_where_it_belongs(
    foreign: ForeignListener, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    key_owner: int, env_key: str | None, want: list[str],
) -> None:
    _use(monkeypatch, tmp_path, foreign.url, key_owner)
    if env_key:
        monkeypatch.setenv("WITHRUNTIME_API_KEY", env_key)
    got = withruntime.Sandbox.list()
    assert got == [], f"list: got {got}"
    assert foreign.keyed() == want, f"the listener got {foreign.keyed()}, want {want}"


_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1
   1: 00000000:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 102 1
   2: 0200007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 103 1
   3: 0100007F:1ECF 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 104 1
   4: 0100007F:1ECE 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1003        0 105 1
"""
_TCP6 = """  sl  local_address                         remote_address                        st tx rx tr tm retr  uid  timeout inode
   0: 00000000000000000000000000000000:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2000        0 201 1
   1: 0000000000000000FFFF00000100007F:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2001        0 202 1
   2: 00000000000000000000000001000000:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2002        0 203 1
"""


@pytest.mark.skipif(sys.byteorder != "little", reason="the sample tables are a little-endian host's")
@pytest.mark.parametrize(
    "table, ip, want",
    [
        (_TCP, "127.0.0.1", [(0, 101), (1000, 102)]),  # the address and 0.0.0.0 only
        (_TCP6, "127.0.0.1", [(2000, 201), (2001, 202)]),  # :: and the mapped address
        (_TCP6, "::1", [(2000, 201), (2002, 203)]),
        (_TCP, "::1", []),
    ],
)
def test_parse_listeners(table: str, ip: str, want: list[tuple[int, int]]) -> None:
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    got = _local.parse_listeners(table, socket.inet_pton(fam, ip), 0x1ECE)
    assert got == want, f"got {got}, want {want}"
