"""The agent tools against smolagents' rules for tool functions.

smolagents cannot be installed here, so this applies its rules (as written
in SPEC.md and as smolagents 1.26 implements them in
_function_type_hints_utils.get_json_schema and tools.tool) to the four
functions: readable source, a description before ``Args:``, every
parameter documented as ``name: text``, no stray ``Word: text`` lines, type
hints mapping to the allowed JSON types, optional arguments accepting None,
and unique valid names.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import re
import textwrap
import types
import typing

import pytest

from withruntime.tools import sandbox_tools

# Python type -> JSON schema type, as smolagents maps them.
ALLOWED = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}

# smolagents' docstring parse (Google style), same expressions in effect:
# the description is everything before the first Args:/Returns:/Raises:
# line; the Args block runs to Returns:/Raises: or the end; inside it, any
# line shaped "word:" or "word (type):" starts a new argument.
DESCRIPTION_RE = re.compile(r"^(.*?)(?=\n\s*(Args:|Returns:|Raises:)|\Z)", re.DOTALL)
ARGS_RE = re.compile(r"\n\s*Args:\n\s*(.*?)[\n\s]*(Returns:|Raises:|\Z)", re.DOTALL)
ARG_SPLIT_RE = re.compile(
    r"(?:^|\n)\s*(\w+)\s*(?:\([^)]*?\))?:\s*(.*?)\s*(?=\n\s*\w+\s*(?:\([^)]*?\))?:|\Z)", re.DOTALL
)
ARG_LINE_RE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*?\))?:")


class FakeSandbox:
    """Enough of a Sandbox to build the tools; never called here."""

    files = None


@pytest.fixture(scope="module")
def tools() -> list:
    return sandbox_tools(FakeSandbox())


EXPECTED = {
    "runtime_exec": (["command", "cwd", "timeout_seconds"], {"cwd", "timeout_seconds"}, "object"),
    "runtime_read_file": (["path"], set(), "string"),
    "runtime_write_file": (["path", "content"], set(), "string"),
    "runtime_list_files": (["path"], {"path"}, "array"),
}


def json_type(hint: object) -> tuple[str, bool]:
    """(JSON type, nullable) for a hint, or fail as smolagents would."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        assert len(args) == 1, f"only `X | None` unions are allowed, got {hint}"
        return json_type(args[0])[0], True
    if origin in (list, dict):
        return ALLOWED[origin], False
    assert hint in ALLOWED, f"type hint {hint!r} is not one of str, int, float, bool, list, dict"
    return ALLOWED[hint], False  # type: ignore[index]


def parse_docstring(doc: str) -> tuple[str, dict[str, str], str | None]:
    description = DESCRIPTION_RE.search(doc)
    args = ARGS_RE.search(doc)
    block = args.group(1).strip() if args else ""
    block = "\n".join(line for line in block.split("\n") if line.strip())
    parsed = {m[0]: re.sub(r"\s*\n+\s*", " ", m[1].strip()) for m in ARG_SPLIT_RE.findall(block)}
    return (description.group(1).strip() if description else ""), parsed, block


def test_order_and_names(tools: list) -> None:
    names = [f.__name__ for f in tools]
    assert names == list(EXPECTED)
    assert len(set(names)) == len(names)
    for n in names:
        assert n.isidentifier() and not keyword.iskeyword(n) and n != "final_answer"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_source_is_a_plain_def(tools: list, name: str) -> None:
    f = next(t for t in tools if t.__name__ == name)
    assert isinstance(f, types.FunctionType) and f.__name__ != "<lambda>"
    src = textwrap.dedent(inspect.getsource(f))
    tree = ast.parse(src)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert node.name == name
    assert not node.decorator_list
    assert node.body, "the function has a body after its docstring"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_signature_and_hints(tools: list, name: str) -> None:
    f = next(t for t in tools if t.__name__ == name)
    params, optional, ret = EXPECTED[name]
    sig = inspect.signature(f)
    assert list(sig.parameters) == params
    hints = typing.get_type_hints(f)
    assert "return" in hints, "a return type hint is required"
    assert json_type(hints["return"])[0] == ret
    for p in sig.parameters.values():
        assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), f"{p.name}: no *args/**kwargs"
        assert p.name in hints, f"{p.name} has no type hint"
        _, nullable = json_type(hints[p.name])
        has_default = p.default is not inspect.Parameter.empty
        if p.name in optional:
            assert has_default and p.default is None, f"{p.name} must default to None"
            assert nullable, f"{p.name} must be hinted `X | None`, since the model may send None"
        else:
            assert not has_default and not nullable, f"{p.name} must be required"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_docstring_parses_like_smolagents(tools: list, name: str) -> None:
    f = next(t for t in tools if t.__name__ == name)
    doc = inspect.getdoc(f)
    assert doc, "a docstring is required"
    doc = doc.strip()
    description, parsed, block = parse_docstring(doc)
    assert description, "a description must come before Args:"
    assert not description.startswith("Args:")
    params = list(inspect.signature(f).parameters)
    # Every parameter documented, and nothing else read as an argument: a
    # continuation line shaped `Word: text` would show up here as an extra.
    assert list(parsed) == params, f"Args parse gave {list(parsed)}, want {params}"
    for p in params:
        assert parsed[p], f"{p} has an empty description"
        assert "(choices:" not in parsed[p].lower()
    # The strict form: one line per argument, each `name: text`.
    lines = [line for line in block.split("\n") if line.strip()]
    assert [ARG_LINE_RE.match(line).group(1) for line in lines] == params  # type: ignore[union-attr]
    # No Returns:/Raises: section would cut the description or the args short.
    assert "\nReturns:" not in doc and "\nRaises:" not in doc


def test_json_schema_like_smolagents(tools: list) -> None:
    """Assemble what smolagents' tool() would put in `inputs` and check it."""
    run = tools[0]
    hints = typing.get_type_hints(run)
    _, parsed, _ = parse_docstring(inspect.getdoc(run) or "")
    inputs = {}
    for p in inspect.signature(run).parameters.values():
        t, nullable = json_type(hints[p.name])
        entry = {"type": t, "description": parsed[p.name]}
        if p.default is not inspect.Parameter.empty:
            entry["nullable"] = True
        inputs[p.name] = entry
    assert list(inputs) == ["command", "cwd", "timeout_seconds"]  # SPEC: print(run.inputs)
    assert inputs["command"]["type"] == "string" and "nullable" not in inputs["command"]
    assert inputs["cwd"] == {**inputs["cwd"], "type": "string", "nullable": True}
    assert inputs["timeout_seconds"]["type"] == "integer" and inputs["timeout_seconds"]["nullable"]


def test_no_future_annotations_in_tools_module() -> None:
    # get_type_hints on a closure resolves string annotations in the module's
    # globals; real annotation objects keep that from depending on scope.
    import withruntime.tools as m

    assert not hasattr(m, "annotations"), "withruntime.tools must not use `from __future__ import annotations`"
