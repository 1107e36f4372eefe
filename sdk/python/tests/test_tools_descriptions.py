"""The agent tools' descriptions are api/tools.json's.

tools.py's docstrings are written by scripts/gen_tools.py from
api/tools.json, the one text the MCP server and the TypeScript tools are
made from too: these tests fail when tools.py drifts from it (run the
script and commit), and when the check itself would miss a drift.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from withruntime.tools import LIST_CAP, OUTPUT_CAP, TIMEOUT_SECONDS, code_tools, sandbox_tools

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gen_tools.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_tools", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _gen()


class FakeSandbox:
    """Enough of a Sandbox to build the tools; never called here."""

    files = None


def test_tools_py_is_generated_from_tools_json() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_functions_docstrings_are_tools_json() -> None:
    described = gen.tools()
    fns = sandbox_tools(FakeSandbox()) + code_tools(FakeSandbox())  # type: ignore[arg-type]
    assert [f.__name__ for f in fns] == list(described)
    for f in fns:
        want = described[f.__name__]
        doc = inspect.getdoc(f) or ""
        head, _, args = doc.partition("\nArgs:\n")
        assert head.strip() == "\n\n".join(x for x in (want["summary"], want["details"]) if x)
        got = [line.strip().split(": ", 1) for line in args.splitlines() if line.strip()]
        assert [tuple(x) for x in got] == want["params"]
        assert list(inspect.signature(f).parameters) == [n for n, _ in want["params"]]


def test_descriptions_state_the_caps() -> None:
    described = gen.tools()
    assert f" {OUTPUT_CAP} " in described["runtime_read_file"]["details"]
    assert f" {LIST_CAP} " in described["runtime_list_files"]["details"]
    for name in ("runtime_exec", "runtime_run_code"):
        assert dict(described[name]["params"])["timeout_seconds"].endswith(f"None means {TIMEOUT_SECONDS} seconds.")


def test_the_check_fails_on_a_drift(tmp_path: Path) -> None:
    source = gen.TOOLS_PY.read_text(encoding="utf-8")
    # A docstring edited by hand in tools.py.
    edited = source.replace("return its content.", "return its text.", 1)
    assert edited != source
    assert gen.render(edited, gen.tools()) == source
    # tools.json edited: a tool's summary and an argument's description.
    data = json.loads(gen.TOOLS_JSON.read_text(encoding="utf-8"))
    for t in data["tools"]:
        if t.get("sdk") == "runtime_write_file":
            t["summary"] = "Write a file."
            t["params"][-1]["description"] = "The bytes."
    changed = tmp_path / "tools.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    fresh = gen.render(source, gen.tools(changed))
    assert fresh != source
    assert '"""Write a file.\n' in fresh and "content: The bytes.\n" in fresh
    # A tool tools.json describes that tools.py lacks, and the reverse.
    with pytest.raises(ValueError, match="runtime_write_file"):
        gen.render(source.replace("def runtime_write_file(", "def write_file("), gen.tools())
    with pytest.raises(ValueError, match="does not describe"):
        gen.render(source, {k: v for k, v in gen.tools().items() if k != "runtime_exec"})
