"""The local daemon: starting it, its admin key, and who may receive it.

The CLI starts the local daemon (``withruntime serve`` in the background) on
the default address when nothing answers there; it keeps its admin key in
``$XDG_DATA_HOME/withruntime/admin.key`` (mode 0600, so only its owner reads
it). A client of the default address with no key set uses that key when it
can read it, so that ``Sandbox.create()`` works with nothing configured.

The daemon exits by itself after ten idle minutes. A client with no base URL
configured (no ``base_url`` argument, WITHRUNTIME_BASE_URL unset) that finds
nothing listening on the default address starts it again the way the CLI
does, by running ``withruntime daemon start`` (the CLI named by
WITHRUNTIME_BINARY, else ``withruntime`` on PATH): the CLI takes the data
dir's lock, so programs starting it at once get one daemon, and it waits
until the daemon answers. A client given a base URL never starts anything.

While no daemon runs, any local user can listen on the default address, so
the key goes only over connections to a socket that the key file's owner
listens on, as the kernel's socket table (/proc/net/tcp and tcp6) says just
before and just after connecting: the same socket both times, so the
connection reached it. Another user's listener is refused with an APIError
``forbidden`` naming its process and user. Where the table cannot be read
(not Linux) the key is not sent at all. The same rule holds in the Go client
and the TypeScript SDK.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from typing import Any

DEFAULT_BASE_URL = "http://127.0.0.1:7878"
# Where `withruntime daemon start` starts the daemon: the CLI's own default
# address (tests move DEFAULT_BASE_URL; they never move this).
DAEMON_URL = "http://127.0.0.1:7878"

# What to do when no server answers, for the error that says so.
START_HINT = (
    "no server answers; start one with `withruntime serve`, or start the local daemon with "
    "`withruntime daemon start` (any CLI command such as `withruntime sandbox ls` starts it too)"
)

# The environment variable naming the CLI to start the local daemon with
# (the npm package's launcher reads the same one).
BINARY_ENV = "WITHRUNTIME_BINARY"
# How long `withruntime daemon start` may take, in seconds: it waits up to
# 20 s itself for the daemon to answer (it first recovers the sandboxes an
# earlier daemon left), and may wait on another program starting it.
START_TIMEOUT = 60.0
# One start at a time in this process: threads that find nothing at once
# run the CLI in turn, and each after the first finds the daemon running.
_start_lock = threading.Lock()


def cli_binary() -> str | None:
    """The withruntime CLI: WITHRUNTIME_BINARY, else ``withruntime`` on PATH."""
    return os.environ.get(BINARY_ENV) or shutil.which("withruntime")


def start_daemon() -> None:
    """Start the local daemon with ``withruntime daemon start`` and return
    once it answers on the default address. A missing CLI, a start that
    fails and a start that takes too long are TransportErrors saying what to
    do; another user's process on the address is the CLI's APIError
    ``forbidden``."""
    from .errors import APIError, TransportError

    binary = cli_binary()
    if not binary:
        raise TransportError(
            f"nothing answers on {DEFAULT_BASE_URL} and the local daemon cannot be started: there is no "
            f"withruntime CLI on PATH (or named by {BINARY_ENV}); install the CLI and start the daemon with "
            f"`withruntime daemon start`, or set WITHRUNTIME_BASE_URL to a running server"
        )
    what = f"starting the local daemon (`{binary} daemon start`)"
    # The CLI's own default address and data dir are the SDK's: it reads
    # the same XDG_DATA_HOME and HOME, and WITHRUNTIME_BASE_URL is unset.
    env = {k: v for k, v in os.environ.items() if k != "WITHRUNTIME_BASE_URL"}
    with _start_lock:
        try:
            p = subprocess.run(
                [binary, "daemon", "start"], stdin=subprocess.DEVNULL, capture_output=True,
                env=env, timeout=START_TIMEOUT, check=False,
            )
        except subprocess.TimeoutExpired:
            raise TransportError(
                f"{what}: no answer after {START_TIMEOUT:.0f} s; see {os.path.join(data_dir(), 'daemon.log')}"
            ) from None
        except OSError as e:
            raise TransportError(
                f"{what}: {e}; install the CLI and start the daemon with `withruntime daemon start`, "
                f"or set WITHRUNTIME_BASE_URL to a running server"
            ) from e
    if p.returncode == 0:
        return
    err = p.stderr.decode("utf-8", "replace").strip()
    last = err.splitlines()[-1] if err else f"exit status {p.returncode}"
    if last.startswith("error: forbidden: "):
        raise APIError("forbidden", 403, last[len("error: forbidden: "):])
    raise TransportError(f"{what}: {last}")


def data_dir() -> str:
    """$XDG_DATA_HOME/withruntime (XDG_DATA_HOME defaulting to ~/.local/share;
    a relative one is ignored, as the XDG spec says)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "withruntime")


def key_path() -> str:
    return os.path.join(data_dir(), "admin.key")


# What is read of admin.key, and of one socket table.
_MAX_KEY = 4096
_MAX_TABLE = 64 << 20
_TCP_LISTEN = "0A"


def read_local_key() -> tuple[str, int] | None:
    """The admin key and the uid of its file's owner (the user whose daemon
    it is), or None. The file is opened without following a symbolic link
    and must be a regular file."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow:
        return None  # no file owners to check (Windows)
    try:
        fd = os.open(key_path(), os.O_RDONLY | nofollow | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        key = os.read(fd, _MAX_KEY).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return (key, st.st_uid) if key else None


def can_check_listeners() -> bool:
    return sys.platform.startswith("linux") and os.path.exists("/proc/net/tcp")


def local_key_and_owner(base_url: str) -> tuple[str, int] | None:
    """The admin key and its owner's uid when base_url is the default address,
    the key file is readable and who listens can be checked; None otherwise."""
    if base_url.rstrip("/") != DEFAULT_BASE_URL or not can_check_listeners():
        return None
    return read_local_key()


def local_key(base_url: str) -> str | None:
    """The local daemon's admin key when it may be sent to base_url (see
    local_key_and_owner); None otherwise."""
    got = local_key_and_owner(base_url)
    return got[0] if got else None


def _parse_addr(s: str) -> tuple[bytes, int]:
    """The kernel's "0100007F:1ECE": 32-bit words in host byte order, the
    port in hex."""
    h, _, p = s.partition(":")
    raw = bytes.fromhex(h)
    if len(raw) not in (4, 16):
        raise ValueError(f"bad socket address {s!r}")
    ip = b"".join(
        int.from_bytes(raw[i : i + 4], "big").to_bytes(4, sys.byteorder) for i in range(0, len(raw), 4)
    )
    return ip, int(p, 16)


def _takes(local: bytes, target: bytes) -> bool:
    """Whether a socket listening at address local takes connections to
    target (4 or 16 bytes): the same address, or the unspecified one (tcp6's
    "::" counts for IPv4 too: a dual-stack socket takes IPv4 connections)."""
    mapped = b"\0" * 10 + b"\xff\xff"
    if local == target or (len(local) == 16 and len(target) == 4 and local == mapped + target):
        return True
    return not any(local) and (len(local) == 16 or len(target) == 4)


def parse_listeners(text: str, target: bytes, port: int) -> list[tuple[int, int]]:
    """The (uid, inode) of each listening socket of one socket table that
    takes connections to target:port."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != _TCP_LISTEN:
            continue
        ip, p = _parse_addr(f[1])
        if p == port and _takes(ip, target):
            out.append((int(f[7]), int(f[9])))
    return out


def listeners_on(host: str, port: int) -> list[tuple[int, int]]:
    """The (uid, inode) of every socket that could take a connection to
    host:port (host an IP address)."""
    try:
        target = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        target = socket.inet_pton(socket.AF_INET6, host)
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                text = f.read(_MAX_TABLE)
        except FileNotFoundError:
            if table.endswith("6"):
                continue  # IPv6 disabled
            raise
        out.extend(parse_listeners(text, target, port))
    return out


def holder(inode: int) -> str:
    """The process holding socket inode, as far as this user can see."""
    want = f"socket:[{inode}]"
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != want:
                    continue
            except OSError:
                continue
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    comm = f.read().strip()
            except OSError:
                comm = "?"
            return f"process {pid} ({comm})"
    return f"a process this user cannot see (socket inode {inode})"


def user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def owned_listeners(host: str, port: int, uid: int) -> set[int]:
    """The inodes of the sockets listening on host:port, all of which must
    belong to uid: another user's is an APIError forbidden naming it, none
    at all ConnectionRefusedError."""
    from .errors import APIError

    ls = listeners_on(host, port)
    if not ls:
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused (nothing listens there)")
    for luid, inode in ls:
        if luid != uid:
            addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise APIError("forbidden", 403, (
                f"{addr} is held by {holder(inode)} of user {user_name(luid)}, not by the local daemon "
                f"of user {user_name(uid)}, who owns its admin key; refusing to send it the local admin key"
            ))
    return {inode for _, inode in ls}


def connect_checked(conn: Any, host: str, port: int, uid: int) -> None:
    """conn.connect(), only to a socket of uid that still listens once
    connected (no other user's socket can listen on the port beside it, so
    the connection reached it)."""
    from .errors import APIError

    before = owned_listeners(host, port, uid)
    conn.connect()
    try:
        after = owned_listeners(host, port, uid)
        if not before & after:
            raise APIError("forbidden", 403, (
                f"the socket listening on {host}:{port} changed while connecting; "
                "refusing to send it the local admin key"
            ))
    except BaseException:
        conn.close()
        raise
