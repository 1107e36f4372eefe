"""E2B's code interpreter client (`e2b-code-interpreter`, pinned, unmodified)
against withruntime's E2B API: run_code with callbacks, rich results,
errors, env_vars and contexts, served by withruntime's own run_code (marked
`live`; the E2B_* variables come from the e2b_env fixture)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from importlib import metadata

import pytest

import withruntime

try:
    from e2b import NotFoundException, TimeoutException
    from e2b_code_interpreter import Sandbox
except ImportError as e:  # pragma: no cover - depends on the environment
    pytest.skip(
        f"e2b-code-interpreter is not importable ({e}): run with the environment scripts/pyenv.sh makes",
        allow_module_level=True,
    )

pytestmark = pytest.mark.live


def test_the_pinned_versions() -> None:
    assert metadata.version("e2b-code-interpreter") == "2.11.5"
    assert metadata.version("e2b") == "2.63.0"


@pytest.fixture(scope="module")
def sbx(e2b_env: dict[str, str], live_server: dict[str, str]) -> Iterator[Sandbox]:
    """A code interpreter sandbox made by E2B's client (its default
    template), killed at the end."""
    s = Sandbox.create(timeout=900)
    try:
        yield s
    finally:
        s.kill()
    # The same sandbox as withruntime sees it, ended by the kill.
    assert withruntime.Sandbox(s.sandbox_id, **live_server).info().state == "ended"


def test_run_code_streams_output_and_keeps_state(sbx: Sandbox) -> None:
    out: list = []
    err: list = []
    ex = sbx.run_code(
        "import sys\nn = 40\nprint('hello')\nprint('warn', file=sys.stderr)\nn + 2",
        on_stdout=out.append,
        on_stderr=err.append,
    )
    assert ex.error is None, ex.error
    assert ex.text == "42"
    assert ex.logs.stdout == ["hello\n"] and ex.logs.stderr == ["warn\n"]
    assert [(m.line, m.error) for m in out] == [("hello\n", False)]
    assert [(m.line, m.error) for m in err] == [("warn\n", True)]
    assert isinstance(out[0].timestamp, int) and out[0].timestamp > 1_600_000_000 * 10**9
    first = ex.execution_count
    again = sbx.run_code("n * 2")
    assert again.text == "80"
    assert again.execution_count == first + 1
    # A cell naming no context runs where E2B's do, in the user's home.
    assert sbx.run_code("import os\nos.getcwd()").text == "'/home/user'"
    # Shell escapes run as the sandbox user (through a pty, as IPython does).
    assert "".join(sbx.run_code("!id -un").logs.stdout).splitlines() == ["user"]


def test_rich_results(sbx: Sandbox) -> None:
    ex = sbx.run_code(
        "import matplotlib.pyplot as plt\n"
        "from IPython.display import JSON, display\n"
        "plt.plot([1, 2, 3], [1, 4, 9]); plt.show()\n"
        "display(JSON({'a': [1, 2]}))\n"
        "import pandas as pd\npd.DataFrame({'col': [1, 2]})"
    )
    assert ex.error is None, ex.error
    pngs = [r for r in ex.results if r.png]
    assert len(pngs) == 1 and not pngs[0].is_main_result
    assert base64.b64decode(pngs[0].png).startswith(b"\x89PNG")
    assert "png" in pngs[0].formats()
    js = [r for r in ex.results if r.json is not None]
    assert len(js) == 1 and js[0].json == {"a": [1, 2]}
    main = [r for r in ex.results if r.is_main_result]
    assert len(main) == 1 and "<table" in (main[0].html or "") and "col" in (main[0].text or "")
    assert ex.text == main[0].text


def test_an_exception_is_an_error_with_name_value_and_traceback(sbx: Sandbox) -> None:
    sbx.run_code("survivor = 'yes'")
    ex = sbx.run_code("print('before')\nraise ValueError('bad value')")
    assert ex.error is not None
    assert (ex.error.name, ex.error.value) == ("ValueError", "bad value")
    assert "ValueError" in ex.error.traceback and "bad value" in ex.error.traceback
    assert ex.logs.stdout == ["before\n"]
    # A BaseException that is no Exception, as smolagents' final answer is.
    ex = sbx.run_code(
        "class FinalAnswerException(BaseException):\n    pass\nraise FinalAnswerException('safe:{\"a\": 1}')"
    )
    assert ex.error is not None
    assert (ex.error.name, ex.error.value) == ("FinalAnswerException", 'safe:{"a": 1}')
    # The kernel lives on.
    assert sbx.run_code("survivor").text == "'yes'"


def test_env_vars_apply_to_one_cell(sbx: Sandbox) -> None:
    sbx.run_code("import os\nos.environ['E2B_KEPT'] = 'before'")
    ex = sbx.run_code(
        "import os\nprint(os.environ['E2B_ONLY'], os.environ['E2B_KEPT'])\n!echo shell $E2B_ONLY",
        envs={"E2B_ONLY": "it's \"quoted\"", "E2B_KEPT": "during"},
    )
    assert ex.error is None, ex.error
    assert "".join(ex.logs.stdout).splitlines() == ["it's \"quoted\" during", "shell it's \"quoted\""]
    # The next cell sees them as they were.
    assert sbx.run_code("os.environ.get('E2B_ONLY'), os.environ['E2B_KEPT']").text == "(None, 'before')"


def test_languages_other_than_python_are_refused(sbx: Sandbox) -> None:
    with pytest.raises(NotFoundException, match="Python only"):
        sbx.run_code("console.log(1)", language="javascript")
    with pytest.raises(NotFoundException, match="Python only"):
        sbx.create_code_context(language="r")


def test_contexts(sbx: Sandbox) -> None:
    home = sbx.create_code_context()
    assert home.language == "python" and home.cwd == "/home/user"
    tmp = sbx.create_code_context(cwd="/tmp", language="python")
    assert tmp.cwd == "/tmp" and tmp.id != home.id
    try:
        assert sbx.run_code("import os\nos.getcwd()", context=tmp).text == "'/tmp'"
        assert sbx.run_code("import os\nos.getcwd()", context=home).text == "'/home/user'"
        sbx.run_code("x = 5", context=tmp)
        assert sbx.run_code("x", context=tmp).text == "5"
        # Contexts have their own state.
        assert sbx.run_code("'x' in globals()", context=home).text == "False"

        listed = {c.id: c for c in sbx.list_code_contexts()}
        assert {home.id, tmp.id, "default"} <= set(listed)
        assert listed[tmp.id].cwd == "/tmp" and listed["default"].cwd == "/home/user"

        # A restart loses the state, keeps the id and the cwd.
        sbx.restart_code_context(tmp)
        assert sbx.run_code("'x' in globals()", context=tmp).text == "False"
        assert sbx.run_code("import os\nos.getcwd()", context=tmp).text == "'/tmp'"
        # The default context too, back in the user's home.
        sbx.run_code("gone_after_restart = 1")
        sbx.restart_code_context("default")
        assert sbx.run_code("'gone_after_restart' in globals()").text == "False"
        assert sbx.run_code("import os\nos.getcwd()").text == "'/home/user'"
    finally:
        sbx.remove_code_context(tmp)
        sbx.remove_code_context(home.id)
    ids = {c.id for c in sbx.list_code_contexts()}
    assert tmp.id not in ids and home.id not in ids
    with pytest.raises(NotFoundException, match="no code context"):
        sbx.run_code("1", context=tmp)
    with pytest.raises(NotFoundException):
        sbx.restart_code_context(tmp)


def test_a_killed_sandbox(e2b_env: dict[str, str]) -> None:
    s = Sandbox.create(timeout=300)
    assert s.run_code("1 + 1").text == "2"
    s.kill()
    with pytest.raises(TimeoutException, match="was not found"):
        s.run_code("1 + 1")


def test_a_cell_over_the_clients_timeout(sbx: Sandbox) -> None:
    with pytest.raises(TimeoutException, match="Execution timed out"):
        sbx.run_code("import time\ntime.sleep(4)\n'late'", timeout=1)
    assert sbx.run_code("21 * 2").text == "42"


def test_a_sandbox_killed_under_a_running_cell(e2b_env: dict[str, str]) -> None:
    s = Sandbox.create(timeout=300)
    assert s.run_code("1 + 1").text == "2"
    killer: list[threading.Thread] = []

    def kill_once_started(_msg: object) -> None:
        if not killer:
            killer.append(threading.Thread(target=s.kill))
            killer[0].start()

    try:
        with pytest.raises(TimeoutException, match="killed while the request was in progress"):
            s.run_code("import time\nprint('started', flush=True)\ntime.sleep(60)", on_stdout=kill_once_started, timeout=120)
    finally:
        for t in killer:
            t.join()
    assert killer, "the cell never started"
