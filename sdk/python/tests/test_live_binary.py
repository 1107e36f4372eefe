"""Output is bytes, against a real server: exec(text=False) is exact."""

from __future__ import annotations

import hashlib

import pytest

from withruntime import Sandbox

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]


def test_exec_text_false_is_exact(live_sbx: Sandbox) -> None:
    r = live_sbx.exec(r"printf '\377\376ok\n'; printf '\200' >&2", text=False)
    assert (r.stdout, r.stderr) == (b"\xff\xfeok\n", b"\x80")
    assert live_sbx.exec(r"printf '\377\376ok\n'").stdout == "\ufffd\ufffdok\n"

    chunks: list[bytes] = []
    r = live_sbx.exec("head -c 100000 /dev/urandom | tee /tmp/r.bin", text=False, on_stdout=chunks.append)
    want = live_sbx.exec("sha256sum /tmp/r.bin").stdout.split()[0]
    assert hashlib.sha256(b"".join(chunks)).hexdigest() == want
    assert r.stdout == b"".join(chunks) and len(r.stdout) == 100000


def test_background_text_false_is_exact(live_sbx: Sandbox) -> None:
    p = live_sbx.exec(r"printf '\377\376ok\n'", background=True, text=False)
    r = p.wait(timeout=60)
    assert r.stdout == b"\xff\xfeok\n"
    assert p.stdout == b"\xff\xfeok\n"
