"""E2B's template builder (e2b 2.63.0's Template, unmodified) against the
live server's --e2b-listen address (tests marked `live`): the build's
calls (request, file upload, start, status with logs), a sandbox from the
template it made, a cached rebuild, a failing step, and the template as
withruntime's own API sees it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

e2b = pytest.importorskip("e2b")

import withruntime  # noqa: E402
from withruntime import Template  # noqa: E402

pytestmark = pytest.mark.live


def _messages(logs: list[Any]) -> list[str]:
    return [str(entry.message) for entry in logs]


def test_build_then_create(e2b_env: dict[str, str], live_server: dict[str, str], tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "app" / "lib").mkdir(parents=True)
    (ctx / "app" / "main.py").write_text("print('hello from the template')\n")
    (ctx / "app" / "lib" / "util.py").write_text("X = 1\n")
    (ctx / "notes.txt").write_text("copied note\n")
    (ctx / "a.cfg").write_text("cfg-a\n")
    (ctx / "b.cfg").write_text("cfg-b\n")
    name = f"e2b-tpl-{uuid.uuid4().hex[:8]}"
    tpl = (
        e2b.Template(file_context_path=str(ctx))
        .from_base_image()
        .copy("app", "/home/user/app")
        .copy("notes.txt", "/opt/notes/", user="root", mode=0o640)
        .copy("*.cfg", "/etc/e2bcfg/", user="root")
        .run_cmd("echo built-as-$(whoami) > /home/user/marker")
        .run_cmd("id -un > /opt/root-step", user="root")
        .set_envs({"TPL_VAR": "from-template"})
        .set_workdir("/home/user/app")
        .set_start_cmd("python3 -m http.server 8123", e2b.wait_for_port(8123))
    )
    logs: list[Any] = []
    info = e2b.Template.build(tpl, name, on_build_logs=logs.append)
    assert info.name == name and info.template_id == name
    msgs = _messages(logs)
    assert any("[builder 1/" in m for m in msgs), msgs
    assert any("Uploaded 'app'" in m for m in msgs), msgs
    assert e2b.Template.exists(name)
    assert not e2b.Template.exists(name + "-never")

    # withruntime's own API sees the template the build made.
    ours = Template.get(name, **live_server)
    assert ours.name == name and ours.source == "build"
    assert ours.defaults.env.get("TPL_VAR") == "from-template"
    assert ours.defaults.start_cmd == "python3 -m http.server 8123"

    sbx = e2b.Sandbox.create(name, timeout=120)
    try:
        assert sbx.get_info().template_id == name
        r = sbx.commands.run(
            "cat /home/user/app/main.py /home/user/app/lib/util.py /home/user/marker /opt/root-step;"
            " cat /etc/e2bcfg/a.cfg /etc/e2bcfg/b.cfg; stat -c '%a %U' /opt/notes/notes.txt; echo $TPL_VAR; pwd"
        )
        out = r.stdout.splitlines()
        assert out == [
            "print('hello from the template')", "X = 1", "built-as-user", "root",
            "cfg-a", "cfg-b", "640 root", "from-template", "/home/user/app",
        ], out
        # The copy's mode and owner held: only root reads the note.
        assert sbx.commands.run("cat /opt/notes/notes.txt", user="root").stdout == "copied note\n"
        with pytest.raises(e2b.CommandExitException):
            sbx.commands.run("cat /opt/notes/notes.txt")
        # The start command runs, and the ready check let the create answer
        # only once it listened.
        code = sbx.commands.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8123/")
        assert code.stdout == "200"
        assert withruntime.Sandbox(sbx.sandbox_id, **live_server).info().template.startswith(name)
    finally:
        sbx.kill()

    # The same template again: every step that makes files (the three
    # copies and the two runs) is taken from the cache, none runs.
    again: list[Any] = []
    e2b.Template.build(tpl, name, on_build_logs=again.append)
    msgs = _messages(again)
    assert len([m for m in msgs if m.startswith("CACHED [builder")]) == 5, msgs
    assert not [m for m in msgs if m.startswith("[builder") and (" run " in m or " copy " in m)], msgs
    Template.delete(name, **live_server)


def test_failing_step_names_itself(e2b_env: dict[str, str], live_server: dict[str, str], tmp_path: Path) -> None:
    name = f"e2b-tpl-bad-{uuid.uuid4().hex[:8]}"
    tpl = (
        e2b.Template(file_context_path=str(tmp_path))
        .from_template("base")
        .run_cmd("echo fine")
        .run_cmd("echo about to fail >&2; exit 3")
    )
    logs: list[Any] = []
    with pytest.raises(e2b.BuildException) as err:
        e2b.Template.build(tpl, name, on_build_logs=logs.append)
    assert "step 2" in str(err.value) and "3" in str(err.value), str(err.value)
    assert any("about to fail" in m for m in _messages(logs)), _messages(logs)
    # Nothing was made.
    assert not e2b.Template.exists(name)


def test_refused_before_anything_runs(e2b_env: dict[str, str], tmp_path: Path) -> None:
    # Two tags in one build, and a name of the wrong shape: refused by the
    # request, with E2B's exception.
    tpl = e2b.Template(file_context_path=str(tmp_path)).from_template("base").run_cmd("true")
    with pytest.raises(e2b.BuildException, match="one tag"):
        e2b.Template.build(tpl, "two-tags", tags=["v1", "v2"])
    with pytest.raises(e2b.BuildException):
        e2b.Template.build(tpl, "Bad Name!")
