"""The SDK against a real withruntime server (marked `live`).

They run against the server WITHRUNTIME_BASE_URL and WITHRUNTIME_API_KEY
name, or against one the test session starts itself when those are unset
(see conftest.py):

    sudo /usr/bin/python3 -m pytest sdk/python/tests          # from the repository root
    WITHRUNTIME_BASE_URL=http://127.0.0.1:7878 WITHRUNTIME_API_KEY=... \\
        /usr/bin/python3 -m pytest sdk/python/tests -m live

Sandboxes are small (1 vCPU, 1 GiB) unless a test is about the default
size, and every one a test makes is stopped (the live_server fixture checks
that at the end of the session).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL, wait_until

from withruntime import APIError, CommandError, ExecResult, Sandbox, TransportError
from withruntime.tools import sandbox_tools

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

REPO = Path(__file__).resolve().parents[3]
FIB = "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n"
FIB_RESULT = {"exit_code": 0, "stdout": "2880067194370816120\n", "stderr": "", "timed_out": False}


def ended(sandbox_id: str) -> Any:
    return Sandbox.connect(sandbox_id).info()


# -- the SPEC's snippets -----------------------------------------------------


MANAGER = """\
import sys, time
from agents.worker import work
print("manager got", sys.argv[1], flush=True)
for i in range(3):
    print(work(i), flush=True)
    time.sleep(0.4)
print("manager: done", file=sys.stderr)
"""


def test_spec_first_snippet(tmp_path: Path) -> None:
    """The SPEC's first snippet, as written: its allow list and cost cap are
    accepted (a 30-minute lease of the default size costs at most 40000
    micros at full CPU)."""
    agents = tmp_path / "my_agents"
    (agents / "agents").mkdir(parents=True)
    (agents / "manager.py").write_text(MANAGER)
    (agents / "agents" / "__init__.py").write_text("")
    (agents / "agents" / "worker.py").write_text("def work(i):\n    return f'step {i} done'\n")
    seen: list[tuple[str, float]] = []
    t0 = time.monotonic()

    with Sandbox.create(
        network={"internet": True, "allow": ["api.openai.com", "*.example.org"]},
        timeout_seconds=1800,
        on_lease_end="stop",
        max_cost_micros=50_000,
    ) as sbx:
        assert sbx.info().raw["network"] == {"internet": True, "allow": ["api.openai.com", "*.example.org"]}
        sent = sbx.files.upload(agents, "/workspace/my_agents")
        assert (sent.files, sent.bytes) == (3, len(MANAGER) + len("def work(i):\n    return f'step {i} done'\n"))
        pip = sbx.exec("python3 -m pip --version", check=True, timeout_ms=300_000)
        assert pip.exit_code == 0 and pip.stdout.startswith("pip "), pip
        run = sbx.exec(
            ["python3", "manager.py", "task"],
            cwd="/workspace/my_agents",
            timeout_ms=1_200_000,
            on_stdout=lambda s: seen.append((s, time.monotonic() - t0)),
        )
        print(run.exit_code, run.stdout, run.stderr, run.timed_out)
        assert isinstance(run, ExecResult)
        assert (run.exit_code, run.timed_out) == (0, False), run
        assert run.stdout == "manager got task\nstep 0 done\nstep 1 done\nstep 2 done\n"
        assert run.stderr == "manager: done\n"
        assert not run.stdout_truncated and not run.stderr_truncated
        assert isinstance(run.pid, int) and run.pid > 0
        assert run.duration_ms is None or run.duration_ms >= 1000
        # Streamed as produced: the first line came well before the last.
        assert "".join(s for s, _ in seen) == run.stdout
        assert seen[0][1] < seen[-1][1] - 0.6, seen
        info = sbx.info()
        assert (info.state, info.on_lease_end) == ("running", "stop")
        assert info.lease_ends_at is not None and info.created_at is not None
        assert abs((info.lease_ends_at - info.created_at).total_seconds() - 1800) < 5
        sandbox_id = sbx.id
    info = ended(sandbox_id)
    assert (info.state, info.end_reason) == ("ended", "stopped")


def test_create_with_no_arguments_has_the_default_size() -> None:
    with Sandbox.create() as sbx:
        info = sbx.info()
        assert (info.vcpus, info.memory_mib, info.on_lease_end) == (2, 4096, "stop")
        assert info.network.get("internet") is False
        assert info.lease_ends_at is not None and info.created_at is not None
        assert abs((info.lease_ends_at - info.created_at).total_seconds() - 300) < 5
        assert sbx.exec("nproc", check=True).stdout == "2\n"
        mem_kib = int(sbx.exec("awk '/^MemTotal:/ {print $2}' /proc/meminfo", check=True).stdout)
        assert 3.8 * (1 << 20) <= mem_kib <= 4.2 * (1 << 20), mem_kib
        total_mib = int(sbx.exec("free -m | awk '/^Mem:/ {print $2}'", check=True).stdout)
        assert 3800 <= total_mib <= 4200, total_mib


def test_small_sandbox_follows_its_size(live_sbx: Sandbox) -> None:
    info = live_sbx.info()
    assert (info.vcpus, info.memory_mib) == (1, 1024)
    assert live_sbx.exec("nproc").stdout == "1\n"
    mem_kib = int(live_sbx.exec("awk '/^MemTotal:/ {print $2}' /proc/meminfo").stdout)
    assert 0.9 * (1 << 20) <= mem_kib <= 1.1 * (1 << 20), mem_kib


# -- commands ----------------------------------------------------------------


def test_info_and_workspace(live_sbx: Sandbox) -> None:
    info = live_sbx.info()
    assert info.state == "running" and info.id == live_sbx.id
    assert info.metadata == {"test": "sdk-python"}
    assert info.lease_ends_at is not None and info.lease_ends_at > datetime.now(timezone.utc)
    assert info.raw["id"] == live_sbx.id
    assert live_sbx.exec("pwd").stdout == "/workspace\n"
    assert live_sbx.id in [s.id for s in Sandbox.list()]


def test_exec_forms(live_sbx: Sandbox) -> None:
    r = live_sbx.exec("echo $GREETING; echo oops >&2; exit 3", env={"GREETING": "hi"})
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "hi\n", "oops\n", False)
    r = live_sbx.exec(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="abc")
    assert r.stdout == "ABC\n"
    assert live_sbx.exec(["printf", "%s|", "a b", "$HOME", "*"]).stdout == "a b|$HOME|*|"
    live_sbx.files.mkdir("sub")
    assert live_sbx.exec("pwd", cwd="sub").stdout == "/workspace/sub\n"
    assert live_sbx.exec("pwd", cwd="/tmp").stdout == "/tmp\n"
    with pytest.raises(CommandError) as e:
        live_sbx.exec("echo bad >&2; exit 4", check=True)
    assert (e.value.result.exit_code, e.value.result.stderr) == (4, "bad\n")
    assert "bad" in str(e.value)


def test_exec_timeout(live_sbx: Sandbox) -> None:
    t0 = time.monotonic()
    r = live_sbx.exec("echo before; sleep 30", timeout_ms=500)
    assert r.timed_out and r.exit_code != 0 and r.stdout == "before\n"
    assert time.monotonic() - t0 < 20
    with pytest.raises(CommandError) as e:
        live_sbx.exec("sleep 30", timeout_ms=300, check=True)
    assert e.value.result.timed_out


def test_streaming(live_sbx: Sandbox) -> None:
    out: list[tuple[str, float]] = []
    err: list[str] = []
    t0 = time.monotonic()
    r = live_sbx.exec(
        "for i in 1 2 3; do echo line $i; echo err $i >&2; sleep 0.5; done",
        on_stdout=lambda s: out.append((s, time.monotonic() - t0)),
        on_stderr=err.append,
    )
    assert r.stdout == "line 1\nline 2\nline 3\n" and r.stderr == "err 1\nerr 2\nerr 3\n"
    assert "".join(s for s, _ in out) == r.stdout and "".join(err) == r.stderr
    assert out[0][1] < out[-1][1] - 0.5, "the first line arrived before the command ended"


def test_callback_may_call_the_sandbox(live_sbx: Sandbox) -> None:
    """A request made from inside an exec callback gets its own connection."""
    seen: list[str] = []
    live_sbx.exec(
        "echo one; sleep 0.2; echo two",
        on_stdout=lambda s: seen.append(live_sbx.exec(["echo", s.strip()]).stdout),
    )
    assert "".join(seen).split() == ["one", "two"]


def test_threads_share_a_sandbox(live_sbx: Sandbox) -> None:
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = live_sbx.exec(f"sleep 0.2; echo {i}").stdout
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == {i: f"{i}\n" for i in range(8)}


def test_large_output(live_sbx: Sandbox) -> None:
    r = live_sbx.exec("head -c 3000000 /dev/zero | tr '\\0' x; echo")
    assert len(r.stdout) == 3_000_001 and not r.stdout_truncated


def test_background_process(live_sbx: Sandbox) -> None:
    p = live_sbx.exec("echo start; sleep 1; echo end >&2; exit 3", background=True)
    assert isinstance(p.pid, int) and p.pid > 0
    assert wait_until(lambda: "start" in p.stdout, timeout=10), "output so far is readable while it runs"
    r = p.wait(timeout=30)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out, r.pid) == (3, "start\n", "end\n", False, p.pid)
    assert p.poll() == 3 and not p.is_running

    sleeper = live_sbx.exec(["sleep", "300"], background=True)
    assert sleeper.is_running and sleeper.poll() is None
    with pytest.raises(TimeoutError):
        sleeper.wait(timeout=0.5)
    assert sleeper.pid in [q.pid for q in live_sbx.processes()]
    again = live_sbx.process(sleeper.pid)
    assert again.is_running and again.cmd == ["sleep", "300"]
    sleeper.kill()
    r = sleeper.wait(timeout=10)
    assert r.exit_code == 128 + 9, r  # killed by SIGKILL, as a shell reports it
    assert not sleeper.is_running
    sleeper.kill()  # killing an ended process is harmless

    checked = live_sbx.exec("exit 5", background=True, check=True)
    with pytest.raises(CommandError):
        checked.wait(timeout=30)


# -- files -------------------------------------------------------------------


def test_files(live_sbx: Sandbox) -> None:
    f = live_sbx.files
    info = f.write("live/a.txt", "héllo\n")
    assert info.path == "/workspace/live/a.txt" and info.size == 7 and info.is_file
    assert f.read("live/a.txt") == "héllo\n"
    f.write("live/b.bin", bytes(range(256)), mode=0o600)
    assert f.read_bytes("live/b.bin") == bytes(range(256))
    assert f.stat("live/b.bin").mode & 0o777 == 0o600
    assert sorted(e.name for e in f.list("live")) == ["a.txt", "b.bin"]
    assert f.exists("live/a.txt") and not f.exists("live/none")
    live_sbx.exec("ln -s /usr/bin/python3 live/py")
    link = f.stat("live/py")
    assert (link.type, link.target) == ("symlink", "/usr/bin/python3")
    with pytest.raises(APIError) as e:
        f.read("live/none")
    assert (e.value.code, e.value.status) == ("not_found", 404)
    assert f.mkdir("live/x/y").is_dir
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
    (src / "py").symlink_to("/usr/bin/python3")  # an absolute link goes as it is
    (src / "empty").mkdir()
    sent = live_sbx.files.upload(src, "/workspace/tree")
    assert sent.files == 5
    assert live_sbx.exec("./run.sh", cwd="tree").stdout == "run\n"
    assert live_sbx.exec("readlink link; readlink py", cwd="tree").stdout == "run.sh\n/usr/bin/python3\n"
    assert live_sbx.exec(["./py", "-c", "print(6 * 7)"], cwd="tree").stdout == "42\n"
    out = tmp_path / "out"
    got = live_sbx.files.download("/workspace/tree", out)
    assert got.files == 5
    for rel in ["pkg/deep/x.py", "run.sh", "big.bin"]:
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
    assert os.readlink(out / "link") == "run.sh" and os.readlink(out / "py") == "/usr/bin/python3"
    assert (out / "empty").is_dir()
    assert os.stat(out / "run.sh").st_mode & 0o111
    # A single file both ways.
    live_sbx.files.upload(src / "run.sh", "single/run.sh")
    live_sbx.files.download("single/run.sh", tmp_path / "single.sh")
    assert (tmp_path / "single.sh").read_text() == "#!/bin/sh\necho run\n"


def test_download_a_virtualenv(live_sbx: Sandbox, tmp_path: Path) -> None:
    """A venv links to the system's Python with an absolute target: it comes
    back as that link (the Go client's rule), never followed."""
    live_sbx.exec("python3 -m venv --without-pip venv", check=True, timeout_ms=120_000)
    target = live_sbx.exec("readlink venv/bin/python3", check=True).stdout.strip()
    assert target.startswith("/")
    dest = tmp_path / "venv"
    got = live_sbx.files.download("venv", dest)
    assert got.files >= 3
    assert os.readlink(dest / "bin" / "python3") == target
    assert os.readlink(dest / "bin" / "python") == "python3"
    assert "home = " in (dest / "pyvenv.cfg").read_text()
    assert set(os.listdir(tmp_path)) == {"venv"}


# -- lifecycle ---------------------------------------------------------------


def test_lifecycle_and_context_manager() -> None:
    with Sandbox.create(timeout_seconds=120, **SMALL) as sbx:
        again = Sandbox.connect(sbx.id)
        assert again.id == sbx.id and again.info().state == "running"
        assert again.exec("echo via connect").stdout == "via connect\n"
        before = sbx.info().lease_ends_at
        assert before is not None
        after = sbx.extend(600).lease_ends_at
        assert after is not None and after - before > timedelta(seconds=400)
    info = ended(sbx.id)
    assert (info.state, info.end_reason) == ("ended", "stopped")
    assert info.ended_at is not None
    with pytest.raises(APIError) as e:
        sbx.exec("echo too late")
    assert (e.value.code, e.value.status) == ("conflict", 409)
    with pytest.raises(APIError) as e:
        sbx.files.read("anything")
    assert e.value.code == "conflict"


def test_stop_inside_the_block_then_leave_it() -> None:
    with Sandbox.create(**SMALL) as sbx:
        info = sbx.stop()
        assert (info.state, info.end_reason) == ("ended", "stopped")
    assert ended(sbx.id).end_reason == "stopped"


def test_error_in_block_still_stops() -> None:
    with pytest.raises(ZeroDivisionError):
        with Sandbox.create(**SMALL) as sbx:
            1 / 0  # noqa: B018
    assert ended(sbx.id).state == "ended"


def test_pause_resume_keeps_state() -> None:
    with Sandbox.create(timeout_seconds=300, **SMALL) as sbx:
        sbx.files.write("kept.txt", "still here")
        counter = sbx.exec("i=0; while :; do i=$((i+1)); echo $i > n; sleep 0.1; done", background=True)
        assert wait_until(lambda: sbx.files.exists("n"), timeout=10)
        paused = sbx.pause()
        assert paused.state == "paused" and paused.paused_at is not None
        assert sbx.info().state == "paused"
        with pytest.raises(APIError) as e:
            sbx.exec("echo while paused")
        assert (e.value.code, e.value.status) == ("conflict", 409)
        resumed = sbx.resume()
        assert resumed.state == "running"
        assert sbx.files.read("kept.txt") == "still here"
        # The process was checkpointed with the rest and goes on counting.
        assert counter.is_running
        n = int(sbx.files.read("n"))
        assert wait_until(lambda: int(sbx.files.read("n") or 0) > n, timeout=10)
        counter.kill()


def test_lease_end_pauses_when_asked() -> None:
    with Sandbox.create(timeout_seconds=2, on_lease_end="pause", **SMALL) as sbx:
        sbx.files.write("kept.txt", "kept")
        assert wait_until(lambda: sbx.info().state == "paused", timeout=30)
        assert sbx.resume().state == "running"
        sbx.extend(120)
        assert sbx.files.read("kept.txt") == "kept"
    assert ended(sbx.id).end_reason == "stopped"


def test_auto_resume() -> None:
    """auto_resume=True: a paused sandbox (by its lease, then by a call) is
    resumed by the next exec, file read or code run, which then runs."""
    with Sandbox.create(timeout_seconds=3, on_lease_end="pause", auto_resume=True, **SMALL) as sbx:
        assert sbx.info().auto_resume is True
        sbx.files.write("kept.txt", "kept")
        assert wait_until(lambda: sbx.info().state == "paused", timeout=30)
        assert sbx.exec("cat kept.txt").stdout == "kept"
        assert sbx.info().state == "running"
        sbx.extend(120)
        for call in (lambda: sbx.files.read("kept.txt"), lambda: sbx.exec("cat kept.txt").stdout):
            assert sbx.pause().state == "paused"
            assert call() == "kept"
            assert sbx.info().state == "running"
    assert ended(sbx.id).end_reason == "stopped"


def test_lease_end_stops_the_sandbox() -> None:
    with Sandbox.create(timeout_seconds=2, **SMALL) as sbx:
        sbx.exec("sleep 300", background=True)
        assert wait_until(lambda: sbx.info().state == "ended", timeout=30)
        assert sbx.info().end_reason == "lease_ended"
        with pytest.raises(APIError) as e:
            sbx.exec("echo too late")
        assert e.value.code == "lease_ended"


def test_lease_end_under_a_running_command() -> None:
    with Sandbox.create(timeout_seconds=3, **SMALL) as sbx:
        with pytest.raises(APIError) as e:
            sbx.exec("echo started; sleep 60")
        assert e.value.code == "lease_ended"


# -- errors ------------------------------------------------------------------


def expect_create_error(**options: Any) -> APIError:
    """Create must fail; a sandbox made by mistake is stopped at once."""
    try:
        sbx = Sandbox.create(**options)
    except APIError as e:
        return e
    sbx.stop()
    pytest.fail(f"create({options}) was accepted")


def test_api_error_codes() -> None:
    e = expect_create_error(vcpus=99)
    assert (e.code, e.status) == ("invalid_request", 400) and "vcpus" in e.message
    e = expect_create_error(memory_mib=100, vcpus=1)
    assert (e.code, e.status) == ("invalid_request", 400)
    e = expect_create_error(network={"allow": ["api.openai.com"]}, **SMALL)
    assert (e.code, e.status) == ("invalid_request", 400) and "internet" in e.message
    e = expect_create_error(network={"internet": True, "allow": ["2130706433"]}, **SMALL)
    assert (e.code, e.status) == ("invalid_request", 400)
    # A first lease that could cost more than 1 micro-dollar at full CPU.
    e = expect_create_error(max_cost_micros=1, **SMALL)
    assert (e.code, e.status) == ("max_cost_exceeded", 402)
    e = expect_create_error(on_lease_end="explode", **SMALL)
    assert e.code == "invalid_request"
    with pytest.raises(APIError) as ei:
        Sandbox.connect("sbx-does-not-exist")
    assert (ei.value.code, ei.value.status) == ("not_found", 404)
    with pytest.raises(APIError) as ei:
        Sandbox.list(api_key="not-a-key")
    assert (ei.value.code, ei.value.status) == ("unauthorized", 401)


def test_network_off_creates_fine() -> None:
    with Sandbox.create(network={"internet": False}, **SMALL) as sbx:
        assert sbx.info().network.get("internet") is False


def test_exec_errors(live_sbx: Sandbox) -> None:
    with pytest.raises(APIError) as e:
        live_sbx.exec("true", cwd="no/such/dir")
    assert e.value.code == "invalid_request"
    with pytest.raises(APIError) as e:
        live_sbx.process(999_999)
    assert e.value.code == "not_found"


def test_unreachable_server_is_transport_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    with pytest.raises(TransportError) as e:
        Sandbox.create(base_url=url, **SMALL)
    assert "127.0.0.1" in str(e.value)
    with pytest.raises(TransportError):
        Sandbox.connect("sbx-any", base_url=url)
    with pytest.raises(TransportError):
        Sandbox.list(base_url=url)
    assert time.monotonic() - t0 < 30


# -- agent tools -------------------------------------------------------------


def test_tools_spec_example(live_sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(live_sbx)
    assert write(path="fib.py", content=FIB) == f"wrote {len(FIB)} bytes to /workspace/fib.py"
    assert run(command="python3 fib.py") == FIB_RESULT
    assert str(run(command="python3 fib.py")) == (
        "{'exit_code': 0, 'stdout': '2880067194370816120\\n', 'stderr': '', 'timed_out': False}"
    )
    assert read(path="fib.py") == FIB
    assert {"name": "fib.py", "type": "file", "size": len(FIB)} in ls()
    assert ls(path=None) == ls()
    failed = run(command="python3 -c 'import sys; sys.exit(5)'", cwd=None, timeout_seconds=None)
    assert failed["exit_code"] == 5 and failed["timed_out"] is False
    timed = run(command="sleep 10", timeout_seconds=1)
    assert timed["timed_out"] is True and timed["exit_code"] != 0
    big = run(command="python3 -c \"print('x' * 100000)\"")
    assert big["stdout"].startswith("[stdout was cut") and len(big["stdout"]) < 20_100
    live_sbx.files.write("toolsdir/a.txt", "a")
    assert run(command="cat a.txt", cwd="toolsdir")["stdout"] == "a"
    assert ls(path="toolsdir") == [{"name": "a.txt", "type": "file", "size": 1}]
    live_sbx.files.write("blob.bin", bytes(range(256)) * 10)
    assert "binary file" in read(path="blob.bin")
    # A missing path is data the model can read, not a raised error.
    missing = read(path="no-such-file.txt")
    assert missing.startswith("not found: ") and "no-such-file.txt" in missing


def test_tools_in_parallel_threads(live_sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(live_sbx)
    out: dict[int, Any] = {}

    def call(i: int) -> None:
        write(path=f"par/{i}.py", content=f"print({i} * {i})\n")
        out[i] = run(command=f"python3 par/{i}.py")

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {i: {"exit_code": 0, "stdout": f"{i * i}\n", "stderr": "", "timed_out": False} for i in range(6)}
    assert len(ls(path="par")) == 6


# -- the examples, as users run them -----------------------------------------


@pytest.mark.parametrize("script", ["tools_smoke.py", "run_program.py"])
def test_examples(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk" / "python")}
    p = subprocess.run(
        [sys.executable, str(REPO / "examples" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    if script == "tools_smoke.py":
        assert str(FIB_RESULT) in p.stdout.splitlines(), p.stdout
        assert f"wrote {len(FIB)} bytes to /workspace/fib.py" in p.stdout
        assert "'exit_code': 3" in p.stdout
    else:
        assert [line for line in p.stdout.splitlines() if line.startswith("step ")] == [
            f"step {i}: hello from the sandbox" for i in range(3)
        ]
        assert "uploaded 4 files" in p.stderr and "downloaded 2 files" in p.stderr
        assert "exit code 0, timed out: False" in p.stderr
