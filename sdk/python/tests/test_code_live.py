"""run_code and contexts against real kernels in a live sandbox (marked
`live`): what test_code.py checks against the fake, and the README's
"Code agents" snippet as written."""

from __future__ import annotations

import base64
import json

import pytest

import readme

import withruntime
from withruntime import APIError, Execution, Sandbox

pytestmark = pytest.mark.live


def test_state_last_expression_and_streams(live_sbx: Sandbox) -> None:
    out: list[str] = []
    err: list[str] = []
    ex = live_sbx.run_code(
        "import sys\nn = 40\nprint('hello'); print('warn', file=sys.stderr)\nn + 2",
        on_stdout=out.append,
        on_stderr=err.append,
    )
    assert isinstance(ex, Execution) and ex.error is None
    assert ex.text == "42" and ex.results[0].is_main_result
    assert "".join(ex.logs.stdout) == "hello\n" == "".join(out)
    assert "".join(ex.logs.stderr) == "warn\n" == "".join(err)
    first = ex.execution_count
    ex = live_sbx.run_code("n * 2")
    assert ex.text == "80" and ex.execution_count == first + 1
    ex = live_sbx.run_code("n = 1")
    assert ex.text is None and ex.results == []


def test_errors_are_data(live_sbx: Sandbox) -> None:
    ex = live_sbx.run_code("print('before')\nraise ValueError('bad value')")
    assert ex.error is not None
    assert (ex.error.name, ex.error.value) == ("ValueError", "bad value")
    assert "ValueError" in ex.error.traceback and "\x1b[" not in ex.error.traceback
    assert ex.logs.stdout == ["before\n"]
    text = str(ex)
    assert text.startswith("stdout:\nbefore\nerror: ValueError: bad value")


def test_rich_results(live_sbx: Sandbox) -> None:
    ex = live_sbx.run_code(
        "import matplotlib.pyplot as plt\n"
        "from IPython.display import display, HTML\n"
        "display(HTML('<b>bold</b>'))\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
        "import pandas as pd\npd.DataFrame({'a': [1, 2]})"
    )
    assert ex.error is None, ex
    html = [r for r in ex.results if r.html and "<b>bold</b>" in r.html]
    assert html and not html[0].is_main_result
    pngs = [r for r in ex.results if r.png]
    assert pngs and base64.b64decode(pngs[0].png).startswith(b"\x89PNG")
    main = [r for r in ex.results if r.is_main_result]
    assert len(main) == 1 and "<table" in (main[0].html or "") and "a" in (main[0].text or "")
    assert "formats=['text', 'png']" in repr(ex) and pngs[0].png not in repr(ex)


def test_timeout_keeps_the_kernel(live_sbx: Sandbox) -> None:
    live_sbx.run_code("kept = 'yes'")
    ex = live_sbx.run_code("while True: pass", timeout_ms=1000)
    assert ex.error is not None and ex.error.name == "TimeoutError"
    assert "timeout_ms=1000" in ex.error.value
    assert live_sbx.run_code("kept").text == "'yes'"


def test_contexts_are_isolated_restarted_and_removed(live_sbx: Sandbox) -> None:
    live_sbx.files.mkdir("ctx-a")  # a context's cwd must exist
    a = live_sbx.contexts.create(cwd="ctx-a", env={"CTX": "a"})
    b = live_sbx.contexts.create()
    try:
        assert a.id.startswith("ctx_") and a.language == "python" and a.cwd == "/workspace/ctx-a"
        live_sbx.run_code("v = 'in a'", context=a)
        assert live_sbx.run_code("'v' in dir()", context=b).text == "False"
        assert live_sbx.run_code("import os; (os.getcwd(), os.environ['CTX'])", context=a.id).text == "('/workspace/ctx-a', 'a')"
        ids = [c.id for c in live_sbx.contexts.list()]
        assert a.id in ids and b.id in ids
        assert live_sbx.contexts.restart(a) == a
        ex = live_sbx.run_code("v", context=a)
        assert ex.error is not None and ex.error.name == "NameError"
    finally:
        live_sbx.contexts.remove(a)
        live_sbx.contexts.remove(b)
    assert a.id not in [c.id for c in live_sbx.contexts.list()]
    with pytest.raises(APIError) as e:
        live_sbx.run_code("1", context=a)
    assert e.value.code == "not_found"


def test_dead_kernel_is_reported(live_sbx: Sandbox) -> None:
    c = live_sbx.contexts.create()
    try:
        live_sbx.run_code("x = 1", context=c)
        ex = live_sbx.run_code("import os; os._exit(1)", context=c)
        assert ex.error is not None and ex.error.name == "DeadKernelError"
        assert live_sbx.run_code("1 + 1", context=c).text == "2"
    finally:
        live_sbx.contexts.remove(c)


def test_readme_snippet(live_server: dict[str, str]) -> None:
    # The README's "Code agents" snippet, as written there.
    ns: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(readme.blocks("Code agents")[0], "README.md", "exec"), ns)
    run, slow, sbx = ns["run"], ns["slow"], ns["sbx"]
    assert run.text is not None and "a" in run.text and run.results[0].html
    assert slow.error.name == "TimeoutError"
    assert withruntime.Sandbox(sbx.id, **live_server).info().state == "ended"
    json.dumps(str(run))  # str(execution) is plain text a model can read
