"""The runtime_* functions the smolagents executor defines in the kernel,
run here on a local directory: the same cell the sandbox gets, with the
same caps as withruntime.tools (test_smolagents.py runs them in a sandbox)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import pytest

from withruntime import tools
from withruntime._kernel_sandbox import runtime_tools_cell

NAMES = ("runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files")


@pytest.fixture
def ns(tmp_path) -> dict[str, Any]:
    g: dict[str, Any] = {}
    exec(runtime_tools_cell(NAMES, str(tmp_path)), g)
    return g


def test_the_cell_defines_exactly_the_four_functions(ns) -> None:
    assert sorted(k for k in ns if not k.startswith("__")) == sorted(NAMES)
    # The functions are tools.py's (the model reads the same descriptions).
    assert ns["runtime_exec"].__doc__ == tools.sandbox_tools(object())[0].__doc__  # type: ignore[arg-type]


def test_exec_results_and_caps(ns, tmp_path) -> None:
    r = ns["runtime_exec"]("echo hi; echo err >&2; pwd; exit 3")
    assert r == {"exit_code": 3, "stdout": f"hi\n{tmp_path}\n", "stderr": "err\n", "timed_out": False}
    os.mkdir(tmp_path / "sub")
    assert ns["runtime_exec"]("pwd", cwd="sub")["stdout"] == f"{tmp_path}/sub\n"
    big = ns["runtime_exec"](f"{sys.executable} -c \"print('y' * 30000, end='')\"")["stdout"]
    assert big == "[stdout was cut: only its last 20000 characters are shown]\n" + "y" * 20000


def test_exec_timeout_kills_the_group(ns, tmp_path) -> None:
    r = ns["runtime_exec"]("(sleep 30; touch late) & sleep 30", timeout_seconds=1)
    assert (r["exit_code"], r["timed_out"]) == (137, True)
    time.sleep(0.2)
    assert not (tmp_path / "late").exists()


def test_exec_does_not_wait_for_a_background_child(ns, tmp_path) -> None:
    # The child holds stdout open until the test lets it go.
    got: list = []
    cmd = "(while [ ! -e go ]; do sleep 0.1; done; echo late) & echo started"
    t = threading.Thread(target=lambda: got.append(ns["runtime_exec"](cmd)))
    t.start()
    t.join(timeout=60)
    (tmp_path / "go").write_text("")
    t.join()
    assert got == [{"exit_code": 0, "stdout": "started\n", "stderr": "", "timed_out": False}]


def readers() -> list[threading.Thread]:
    names = ("withruntime-exec-reader", "(_read)")  # the second: before they were named
    return [t for t in threading.enumerate() if t.is_alive() and t.name.endswith(names)]


def test_a_background_child_holding_the_pipes_pins_no_reader(ns, tmp_path) -> None:
    # The child keeps stdout and stderr open, writing, until the test lets it
    # go: once the call returned, no reader thread (and so no buffer) may
    # still be tied to it, and the child writing on loses its pipe.
    before = readers()
    cmd = "(while [ ! -e go ]; do echo tick; echo tock >&2; sleep 0.05; done; touch gone) & echo started"
    r = ns["runtime_exec"](cmd)
    try:
        # The child may print before the shell does: "started" is one line
        # among the ticks, not necessarily the first.
        assert r["exit_code"] == 0 and "started" in r["stdout"].splitlines()
        assert readers() == before
        # The child's next write gets SIGPIPE: it ends without reaching "touch gone".
        time.sleep(0.5)
        assert not (tmp_path / "gone").exists()
    finally:
        (tmp_path / "go").write_text("")


def test_files(ns, tmp_path) -> None:
    assert ns["runtime_write_file"]("a/b.txt", "x" * 30000) == f"wrote 30000 bytes to {tmp_path}/a/b.txt"
    text = ns["runtime_read_file"]("a/b.txt")
    assert text.startswith("x" * 20000 + "\n[cut: only the first 20000 bytes of a/b.txt are shown (30000 bytes in all)")
    (tmp_path / "target").write_text("keep")
    os.symlink(tmp_path / "target", tmp_path / "link")
    ns["runtime_write_file"]("link", "new")
    assert (tmp_path / "target").read_text() == "keep" and (tmp_path / "link").read_text() == "new"
    os.symlink("target", tmp_path / "link2")
    (tmp_path / "bin").write_bytes(b"\0\1\2")
    entries = {e["name"]: e for e in ns["runtime_list_files"]()}
    assert [entries[n]["type"] for n in ("a", "target", "link", "link2", "bin")] == ["dir", "file", "file", "symlink", "file"]
    assert entries["target"]["size"] == 4
    assert ns["runtime_read_file"](str(tmp_path / "bin")).startswith(f"[{tmp_path}/bin is a binary file (3 bytes)")
    # A path that is not there is data, as outside the sandbox.
    assert ns["runtime_read_file"]("missing") == f"not found: {tmp_path}/missing (no such file or directory)"
    assert ns["runtime_list_files"]("bin/x") == [
        {"name": f"not found: {tmp_path}/bin/x (no such file or directory)", "type": "note", "size": 0}]


def test_list_is_capped(ns, tmp_path) -> None:
    for i in range(tools.LIST_CAP + 5):
        (tmp_path / f"f{i:04}").write_text("")
    out = ns["runtime_list_files"](".")
    assert len(out) == tools.LIST_CAP + 1 and out[-1]["name"] == "[5 more entries not shown]"
