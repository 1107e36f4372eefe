"""The SDK against a real withruntime server (marked `live`).

They run when WITHRUNTIME_BASE_URL and WITHRUNTIME_API_KEY name a running
server, and are skipped with that reason otherwise (see conftest.py):

    WITHRUNTIME_BASE_URL=http://127.0.0.1:7878 WITHRUNTIME_API_KEY=... \\
        /usr/bin/python3 -m pytest sdk/python/tests -m live
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from withruntime import APIError, CommandError, Sandbox
from withruntime.tools import sandbox_tools

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[3]
FIB = "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n"


def test_defaults(live_sbx: Sandbox) -> None:
    info = live_sbx.info()
    assert info.state == "running" and info.id == live_sbx.id
    assert info.lease_ends_at is not None
    assert live_sbx.exec("nproc").stdout.strip() == str(info.vcpus)
    assert live_sbx.exec("pwd").stdout == "/workspace\n"


def test_exec_forms(live_sbx: Sandbox) -> None:
    r = live_sbx.exec("echo $GREETING; echo oops >&2; exit 3", env={"GREETING": "hi"})
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "hi\n", "oops\n", False)
    r = live_sbx.exec(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="abc")
    assert r.stdout == "ABC\n"
    live_sbx.files.mkdir("sub")
    assert live_sbx.exec("pwd", cwd="sub").stdout == "/workspace/sub\n"
    with pytest.raises(CommandError) as e:
        live_sbx.exec("exit 4", check=True)
    assert e.value.result.exit_code == 4


def test_exec_timeout(live_sbx: Sandbox) -> None:
    t0 = time.monotonic()
    r = live_sbx.exec("sleep 30", timeout_ms=500)
    assert r.timed_out and r.exit_code != 0
    assert time.monotonic() - t0 < 20


def test_streaming(live_sbx: Sandbox) -> None:
    seen: list[tuple[str, float]] = []
    t0 = time.monotonic()
    r = live_sbx.exec(
        "for i in 1 2 3; do echo line $i; sleep 0.5; done",
        on_stdout=lambda s: seen.append((s, time.monotonic() - t0)),
    )
    assert r.stdout == "line 1\nline 2\nline 3\n"
    assert "".join(s for s, _ in seen) == r.stdout
    assert seen[0][1] < seen[-1][1] - 0.5, "the first line arrived before the command ended"


def test_files(live_sbx: Sandbox) -> None:
    f = live_sbx.files
    info = f.write("live/a.txt", "héllo\n")
    assert info.path == "/workspace/live/a.txt" and info.size == 7
    assert f.read("live/a.txt") == "héllo\n"
    f.write("live/b.bin", bytes(range(256)), mode=0o600)
    assert f.read_bytes("live/b.bin") == bytes(range(256))
    assert f.stat("live/b.bin").mode & 0o777 == 0o600
    assert sorted(e.name for e in f.list("live")) == ["a.txt", "b.bin"]
    assert f.exists("live/a.txt") and not f.exists("live/none")
    with pytest.raises(APIError) as e:
        f.read("live/none")
    assert e.value.code == "not_found"
    f.remove("live", recursive=True)
    assert not f.exists("live")


def test_directory_round_trip(live_sbx: Sandbox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "deep" / "x.py").write_text("X = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    (src / "big.bin").write_bytes(os.urandom(4 << 20))
    (src / "link").symlink_to("run.sh")
    (src / "empty").mkdir()
    sent = live_sbx.files.upload(src, "/workspace/tree")
    assert sent.files == 4
    assert live_sbx.exec("./run.sh", cwd="tree").stdout == "run\n"
    assert live_sbx.exec("readlink link", cwd="tree").stdout == "run.sh\n"
    out = tmp_path / "out"
    live_sbx.files.download("/workspace/tree", out)
    for rel in ["pkg/deep/x.py", "run.sh", "big.bin"]:
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
    assert os.readlink(out / "link") == "run.sh"
    assert (out / "empty").is_dir()
    assert os.stat(out / "run.sh").st_mode & 0o111
    # A single file both ways.
    live_sbx.files.upload(src / "run.sh", "single/run.sh")
    live_sbx.files.download("single/run.sh", tmp_path / "single.sh")
    assert (tmp_path / "single.sh").read_text() == "#!/bin/sh\necho run\n"


def test_background_process(live_sbx: Sandbox) -> None:
    p = live_sbx.exec("echo start; sleep 1; echo end; exit 3", background=True)
    assert p.pid > 0
    time.sleep(0.3)
    assert "start" in p.stdout
    r = p.wait(timeout=30)
    assert (r.exit_code, r.stdout) == (3, "start\nend\n")
    sleeper = live_sbx.exec(["sleep", "300"], background=True)
    assert sleeper.is_running
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert not sleeper.is_running


def test_tools_spec_example(live_sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(live_sbx)
    assert write(path="fib.py", content=FIB) == f"wrote {len(FIB)} bytes to /workspace/fib.py"
    assert run(command="python3 fib.py") == {
        "exit_code": 0,
        "stdout": "2880067194370816120\n",
        "stderr": "",
        "timed_out": False,
    }
    assert read(path="fib.py") == FIB
    assert {"name": "fib.py", "type": "file", "size": len(FIB)} in ls()
    assert ls(path=None) == ls()
    failed = run(command="python3 -c 'import sys; sys.exit(5)'", cwd=None, timeout_seconds=None)
    assert failed["exit_code"] == 5
    assert run(command="sleep 10", timeout_seconds=1)["timed_out"] is True
    big = run(command="python3 -c \"print('x' * 100000)\"")
    assert big["stdout"].startswith("[stdout was cut") and len(big["stdout"]) < 20_100


def test_lifecycle_and_context_manager() -> None:
    with Sandbox.create(timeout_seconds=120) as sbx:
        again = Sandbox.connect(sbx.id)
        assert again.info().state == "running"
        before = sbx.info().lease_ends_at
        assert sbx.extend(600).lease_ends_at > before  # type: ignore[operator]
    info = Sandbox.connect(sbx.id).info()
    assert (info.state, info.end_reason) == ("ended", "stopped")
    with pytest.raises(APIError) as e:
        sbx.exec("echo too late")
    assert e.value.code in ("conflict", "lease_ended", "not_found")


def test_pause_resume_keeps_state() -> None:
    with Sandbox.create(timeout_seconds=300) as sbx:
        sbx.files.write("kept.txt", "still here")
        try:
            assert sbx.pause().state == "paused"
        except APIError as e:
            if e.code == "not_supported":
                pytest.skip(f"this server does not pause: {e}")
            raise
        assert sbx.resume().state == "running"
        assert sbx.files.read("kept.txt") == "still here"


def test_missing_sandbox() -> None:
    with pytest.raises(APIError) as e:
        Sandbox.connect("sbx-does-not-exist")
    assert e.value.code == "not_found"


@pytest.mark.parametrize("script", ["tools_smoke.py", "run_program.py"])
def test_examples(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk" / "python")}
    p = subprocess.run(
        [sys.executable, str(REPO / "examples" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    if script == "tools_smoke.py":
        assert "{'exit_code': 0, 'stdout': '2880067194370816120\\n', 'stderr': '', 'timed_out': False}" in p.stdout
    else:
        assert "step 2: hello from the sandbox" in p.stdout and "downloaded" in p.stderr
