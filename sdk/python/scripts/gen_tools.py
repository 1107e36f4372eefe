"""Writes the agent tools' docstrings in withruntime/tools.py from api/tools.json.

api/tools.json holds each agent tool's description and its arguments'
once, for the MCP server and both SDKs. The Python tools keep theirs as
docstrings (smolagents and LangChain read a tool from its function's
docstring, and withruntime.smolagents ships tools.py's source into the
sandbox's kernel, so the text must be in that file): this script rewrites
the docstring of each ``runtime_*`` function there from the file, and
tests/test_tools_descriptions.py fails when tools.py is not what it would
write.

    python3 sdk/python/scripts/gen_tools.py          # rewrite tools.py
    python3 sdk/python/scripts/gen_tools.py --check  # exit 1 when stale

Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS_JSON = HERE.parents[2] / "api" / "tools.json"
TOOLS_PY = HERE.parent / "withruntime" / "tools.py"
SURFACE = "python"
# The docstrings' indentation: the functions are nested in sandbox_tools
# and code_tools.
INDENT = " " * 8


def _resolve(text: object, words: dict[str, str]) -> str:
    """A text of tools.json (a string, or a list of parts, each a string or
    {only, text}) as this surface shows it, its placeholders filled."""
    parts = [text] if isinstance(text, str) else list(text or [])
    out = ""
    for p in parts:
        if isinstance(p, str):
            out += p
        elif SURFACE in p.get("only", [SURFACE]):
            out += p["text"]

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in words:
            raise ValueError(f"unknown placeholder {m.group(0)}")
        return words[m.group(1)]

    return re.sub(r"\{([a-z_]*)\}", fill, out)


def tools(path: Path = TOOLS_JSON) -> dict[str, dict]:
    """The SDK's tools by name: {"summary", "details", "params": [(name, text)]}."""
    data = json.loads(path.read_text(encoding="utf-8"))
    words = data["surfaces"][SURFACE]
    out = {}
    for t in data["tools"]:
        if not t.get("sdk"):
            continue
        params = [
            (p["name"], _resolve(p["description"], words))
            for p in t.get("params", [])
            if SURFACE in p.get("only", [SURFACE])
        ]
        out[t["sdk"]] = {
            "summary": _resolve(t["summary"], words),
            "details": _resolve(t.get("details", ""), words),
            "params": params,
        }
    return out


def docstring(tool: dict) -> str:
    """A tool's docstring as tools.py writes it: summary, details, Args."""
    lines = [tool["summary"], ""]
    if tool["details"]:
        lines += [tool["details"], ""]
    lines.append("Args:")
    lines += [f"    {name}: {text}" for name, text in tool["params"]]
    body = "\n".join((INDENT + line) if line else "" for line in lines)
    return '"""' + body[len(INDENT):] + "\n" + INDENT + '"""'


def render(source: str, described: dict[str, dict]) -> str:
    """tools.py's source with each runtime_* function's docstring
    replaced by the one tools.json gives it."""
    seen = set()

    def put(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in described:
            raise ValueError(f"tools.py has {name}, which api/tools.json does not describe")
        seen.add(name)
        return m.group(1) + docstring(described[name])

    out = re.sub(r'(\n {4}def (runtime_\w+)\(.*?\) -> \w+:\n {8})""".*?"""', put, source, flags=re.DOTALL)
    missing = set(described) - seen
    if missing:
        raise ValueError(f"api/tools.json describes {sorted(missing)}, which tools.py does not define")
    return out


def main(argv: list[str]) -> int:
    source = TOOLS_PY.read_text(encoding="utf-8")
    fresh = render(source, tools())
    if "--check" in argv:
        if fresh != source:
            print("sdk/python/withruntime/tools.py is stale: run python3 sdk/python/scripts/gen_tools.py", file=sys.stderr)
            return 1
        print("sdk/python/withruntime/tools.py matches api/tools.json")
        return 0
    if fresh != source:
        TOOLS_PY.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
