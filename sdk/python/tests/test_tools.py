"""The agent tools' behaviour against the fake server: None as the default,
capped output, what they return, and calls from parallel threads."""

from __future__ import annotations

import json
import threading

import pytest

from withruntime import APIError, Sandbox
from withruntime.tools import LIST_CAP, OUTPUT_CAP, sandbox_tools


def exec_bodies(fake) -> list[dict]:
    return [json.loads(r.body) for r in fake.state.requests if r.path.endswith("/exec")]


def test_exec_returns_the_four_fields(fake, sbx: Sandbox) -> None:
    run, _, _, _ = sandbox_tools(sbx)
    out = run(command="echo 2880067194370816120")
    assert out == {"exit_code": 0, "stdout": "2880067194370816120\n", "stderr": "", "timed_out": False}
    assert list(out) == ["exit_code", "stdout", "stderr", "timed_out"]


def test_exec_none_means_default(fake, sbx: Sandbox) -> None:
    run = sandbox_tools(sbx)[0]
    run(command="echo a", cwd=None, timeout_seconds=None)
    run("echo b")
    run(command="echo c", cwd="sub", timeout_seconds=5)
    bodies = exec_bodies(fake)
    # The default per-call timeout is 120 s: a foreground server costs the
    # agent two minutes, not the lease.
    assert bodies[0] == {"cmd": "echo a", "timeout_ms": 120_000}
    assert bodies[1] == {"cmd": "echo b", "timeout_ms": 120_000}
    assert bodies[2] == {"cmd": "echo c", "cwd": "sub", "timeout_ms": 5000}


def test_exec_default_timeout_from_binding(fake, sbx: Sandbox) -> None:
    run = sandbox_tools(sbx, timeout_seconds=60)[0]
    run(command="echo a")
    run(command="echo b", timeout_seconds=2)
    assert [b.get("timeout_ms") for b in exec_bodies(fake)] == [60_000, 2_000]


def test_exec_no_default_timeout(fake, sbx: Sandbox) -> None:
    run = sandbox_tools(sbx, timeout_seconds=None)[0]
    run(command="echo a")
    assert exec_bodies(fake) == [{"cmd": "echo a"}]
    assert "None means no limit but the sandbox's lease." in (run.__doc__ or "")


def test_exec_old_name_of_the_default(fake, sbx: Sandbox) -> None:
    sandbox_tools(sbx, default_timeout_seconds=60)[0](command="echo a")
    sandbox_tools(sbx, default_timeout_seconds=None)[0](command="echo b")
    assert [b.get("timeout_ms") for b in exec_bodies(fake)] == [60_000, None]


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [({}, "None means 120 seconds."), ({"timeout_seconds": 30}, "None means 30 seconds."),
     ({"timeout_seconds": None}, "None means no limit but the sandbox's lease.")],
)
def test_exec_description_states_the_default(sbx: Sandbox, kwargs: dict, said: str) -> None:
    doc = sandbox_tools(sbx, **kwargs)[0].__doc__ or ""
    line = next(ln.strip() for ln in doc.splitlines() if ln.strip().startswith("timeout_seconds:"))
    assert line == "timeout_seconds: Seconds after which the command is killed; " + said
    assert "nohup" in doc and "2>&1 &" in doc and "timed_out True" in doc


def test_default_timeout_must_be_positive(sbx: Sandbox) -> None:
    with pytest.raises(ValueError):
        sandbox_tools(sbx, timeout_seconds=0)


def test_exec_failure_is_returned_not_raised(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: [
        {"type": "stderr", "data": "Traceback ...\nZeroDivisionError\n"},
        {"type": "exit", "exit_code": 1},
    ]
    out = sandbox_tools(sbx)[0](command="python3 -c '1/0'")
    assert out["exit_code"] == 1 and "ZeroDivisionError" in out["stderr"]


def test_exec_timeout_is_returned(fake, sbx: Sandbox) -> None:
    fake.state.exec_handler = lambda req: [{"type": "exit", "exit_code": -1, "timed_out": True}]
    out = sandbox_tools(sbx)[0](command="sleep 99", timeout_seconds=1)
    assert out["timed_out"] is True


def test_exec_output_is_capped_with_a_note(fake, sbx: Sandbox) -> None:
    big = "".join(f"line {i}\n" for i in range(20_000))
    fake.state.exec_handler = lambda req: [
        {"type": "stdout", "data": big},
        {"type": "stderr", "data": "small"},
        {"type": "exit", "exit_code": 0},
    ]
    out = sandbox_tools(sbx)[0](command="x")
    assert out["stdout"].endswith("line 19999\n")
    assert out["stdout"].startswith("[stdout was cut: only its last 20000 characters are shown]\n")
    assert len(out["stdout"]) < OUTPUT_CAP + 100
    assert out["stderr"] == "small"
    assert len(str(out)) < 2 * OUTPUT_CAP + 500


def test_a_missing_path_is_data(fake, sbx: Sandbox) -> None:
    _, read, _, ls = sandbox_tools(sbx)
    assert read(path="missing.txt") == "not found: /workspace/missing.txt (no such file or directory)"
    assert read(path="/etc/nope/../gone") == "not found: /etc/gone (no such file or directory)"
    assert ls(path="nodir") == [
        {"name": "not found: /workspace/nodir (no such file or directory)", "type": "note", "size": 0}]


def test_platform_errors_raise(fake, sbx: Sandbox) -> None:
    run, read, _, ls = sandbox_tools(sbx)
    # A sandbox that is not there is the platform's failure, not a path's.
    _, gone_read, _, gone_ls = sandbox_tools(Sandbox("sbx_doesnotexist"))
    for call in (lambda: gone_read(path="missing.txt"), lambda: gone_ls(path="nodir")):
        with pytest.raises(APIError) as e:
            call()
        assert e.value.code == "not_found"
    sbx.stop()
    with pytest.raises(APIError):
        run(command="echo x")
    with pytest.raises(APIError) as e:
        read(path="missing.txt")
    assert e.value.code == "conflict"


def test_write_read_list(fake, sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(sbx)
    msg = write(path="fib.py", content="a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n")
    assert msg == "wrote 57 bytes to /workspace/fib.py"
    assert read(path="fib.py").startswith("a, b = 0, 1\n")
    write(path="sub/é.txt", content="é")
    assert ls() == ls(path=None) == [
        {"name": "fib.py", "type": "file", "size": 57},
        {"name": "sub", "type": "dir", "size": 4096},
    ]
    assert ls(path="sub") == [{"name": "é.txt", "type": "file", "size": 2}]


def test_read_is_capped_with_a_note(fake, sbx: Sandbox) -> None:
    _, read, write, _ = sandbox_tools(sbx)
    write(path="big.txt", content="x" * 50_000)
    text = read(path="big.txt")
    assert text.startswith("x" * OUTPUT_CAP)
    assert "[cut: only the first 20000 bytes of big.txt are shown (50000 bytes in all)" in text
    assert len(text) < OUTPUT_CAP + 300
    write(path="fits.txt", content="ok")
    assert read(path="fits.txt") == "ok"


def test_read_binary_says_so(fake, sbx: Sandbox) -> None:
    sbx.files.write("blob", b"\x7fELF\x00\x00\x01")
    assert "binary file (7 bytes)" in sandbox_tools(sbx)[1](path="blob")


def test_list_is_capped(fake, sbx: Sandbox) -> None:
    for i in range(LIST_CAP + 5):
        fake.state.files[f"/workspace/many/f{i:04d}"] = b""
    fake.state.dirs.add("/workspace/many")
    out = sandbox_tools(sbx)[3](path="many")
    assert len(out) == LIST_CAP + 1
    assert out[-1] == {"name": "[5 more entries not shown]", "type": "note", "size": 0}


def test_tools_from_parallel_threads(fake, sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(sbx)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for j in range(5):
                assert write(path=f"t{i}/{j}.txt", content=f"{i}-{j}").startswith("wrote")
                assert read(path=f"t{i}/{j}.txt") == f"{i}-{j}"
                assert run(command=f"echo {i}-{j}")["stdout"] == f"{i}-{j}\n"
            assert len(ls(path=f"t{i}")) == 5
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
