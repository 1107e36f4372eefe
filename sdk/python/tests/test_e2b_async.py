"""The unmodified e2b SDK's asyncio clients against withruntime's E2B API:
e2b.AsyncSandbox (create, commands.run, files write/read, watch_dir with
its async event stream, kill) and e2b_code_interpreter.AsyncSandbox's
run_code, over real sandboxes (marked `live`; the E2B_* variables come from
the e2b_env fixture). Each test drives its own event loop (asyncio.run):
the suite has no asyncio plugin."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import withruntime

try:
    import e2b
    from e2b import CommandExitException, FilesystemEventType, SandboxNotFoundException
    from e2b_code_interpreter import AsyncSandbox as AsyncInterpreter
except ImportError as e:  # pragma: no cover - depends on the environment
    pytest.skip(
        f"e2b is not importable ({e}): run with the environment scripts/pyenv.sh makes",
        allow_module_level=True,
    )

pytestmark = pytest.mark.live


def test_async_sandbox_commands_files_watch_and_kill(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    async def main() -> None:
        sbx = await e2b.AsyncSandbox.create(timeout=300, metadata={"test": "e2b-async"}, envs={"FROM_CREATE": "c1"})
        try:
            native = withruntime.Sandbox(sbx.sandbox_id, **live_server)
            assert native.info().state == "running"
            assert native.info().metadata["test"] == "e2b-async"

            out: list[str] = []
            res = await sbx.commands.run("echo $FROM_CREATE; id -un; echo err >&2", on_stdout=out.append)
            assert (res.exit_code, res.stdout, res.stderr) == (0, "c1\nuser\n", "err\n")
            assert "".join(out) == "c1\nuser\n"
            with pytest.raises(CommandExitException) as ei:
                await sbx.commands.run("echo partial; exit 4")
            assert (ei.value.exit_code, ei.value.stdout) == (4, "partial\n")

            info = await sbx.files.write("async/hello.txt", "héllo")
            assert info.path == "/home/user/async/hello.txt"
            assert await sbx.files.read("async/hello.txt") == "héllo"
            assert native.files.read("/home/user/async/hello.txt") == "héllo"
            raw = bytes(range(256))
            await sbx.files.write("/tmp/async.bin", raw)
            assert await sbx.files.read("/tmp/async.bin", format="bytes") == raw

            # watch_dir: the async handle calls on_event from its own task
            # as the stream brings events.
            events: list[Any] = []
            seen = asyncio.Event()

            def on_event(ev: Any) -> None:
                events.append(ev)
                if ev.name == "made.txt" and ev.type in (FilesystemEventType.CREATE, FilesystemEventType.WRITE):
                    seen.set()

            await sbx.files.make_dir("/home/user/watched")
            handle = await sbx.files.watch_dir("/home/user/watched", on_event)
            try:
                # Made by a command, not by the files API: the watch sees
                # the sandbox's own filesystem.
                await sbx.commands.run("echo x > /home/user/watched/made.txt")
                await asyncio.wait_for(seen.wait(), timeout=30)
            finally:
                await handle.stop()
            assert any(ev.name == "made.txt" and ev.type == FilesystemEventType.CREATE for ev in events), events
            assert all(ev.name in ("made.txt",) for ev in events), events
        finally:
            assert await sbx.kill() is True
        assert native.info().state == "ended"
        assert await sbx.kill() is False
        with pytest.raises(SandboxNotFoundException):
            await e2b.AsyncSandbox.connect(sbx.sandbox_id)

    asyncio.run(main())


def test_async_interpreter_run_code(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    async def main() -> None:
        sbx = await AsyncInterpreter.create(timeout=300)
        try:
            stdout: list[str] = []
            ex = await sbx.run_code("import sys\nx = 20\nprint('hi')\nx * 2 + 2", on_stdout=lambda m: stdout.append(m.line))
            assert ex.error is None, ex.error
            assert ex.text == "42"
            assert ex.logs.stdout == ["hi\n"]
            assert stdout == ["hi\n"]
            # State is kept between cells; an error carries name and value.
            err = await sbx.run_code("x / 0")
            assert err.error is not None
            assert (err.error.name, err.error.value) == ("ZeroDivisionError", "division by zero")
            assert "ZeroDivisionError" in err.error.traceback
        finally:
            await sbx.kill()
        assert withruntime.Sandbox(sbx.sandbox_id, **live_server).info().state == "ended"

    asyncio.run(main())
