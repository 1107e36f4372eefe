"""The local daemon's admin key.

The CLI starts the local daemon (``withruntime serve`` in the background) on
the default address when nothing answers there; it keeps its admin key in
``$XDG_DATA_HOME/withruntime/admin.key`` (mode 0600, so only its owner reads
it). A client of the default address with no key set uses that key when it
can read it, so that after any CLI command ``Sandbox.create()`` works with
nothing configured.
"""

from __future__ import annotations

import os

DEFAULT_BASE_URL = "http://127.0.0.1:7878"

# What to do when no server answers, for the error that says so.
START_HINT = (
    "no server answers; start one with `withruntime serve`, or run any CLI command "
    "such as `withruntime sandbox ls` (it starts the local daemon)"
)


def data_dir() -> str:
    """$XDG_DATA_HOME/withruntime (XDG_DATA_HOME defaulting to ~/.local/share;
    a relative one is ignored, as the XDG spec says)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "withruntime")


def key_path() -> str:
    return os.path.join(data_dir(), "admin.key")


def local_key(base_url: str) -> str | None:
    """The local daemon's admin key when base_url is the default address and
    the key file is readable; None otherwise."""
    if base_url.rstrip("/") != DEFAULT_BASE_URL:
        return None
    try:
        with open(key_path(), encoding="utf-8") as f:
            key = f.read().strip()
    except OSError:
        return None
    return key or None
