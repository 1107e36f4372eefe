"""Smoke test of the agent tools with no model (the SPEC's snippet).

Runs against the server named by WITHRUNTIME_BASE_URL / WITHRUNTIME_API_KEY
(default http://127.0.0.1:7878). Uses smolagents' `tool` when smolagents is
installed, and calls the plain functions otherwise: both must behave alike.

    PYTHONPATH=sdk/python python3 examples/tools_smoke.py
"""

import inspect

from withruntime import Sandbox
from withruntime.tools import sandbox_tools

try:
    from smolagents import tool
except ImportError:  # smolagents is optional here
    tool = None

FIB = "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n"


def main() -> None:
    with Sandbox.create() as sbx:
        fns = sandbox_tools(sbx)
        if tool is not None:
            run, read, write, ls = (tool(f) for f in fns)
            print(run.inputs)  # command, cwd, timeout_seconds
        else:
            run, read, write, ls = fns
            print(list(inspect.signature(run).parameters))  # command, cwd, timeout_seconds
        print(write(path="fib.py", content=FIB))
        print(run(command="python3 fib.py"))
        # {'exit_code': 0, 'stdout': '2880067194370816120\n', 'stderr': '', 'timed_out': False}
        print(read(path="fib.py"), end="")
        print(ls())
        print(run(command="exit 3"))  # a failure is returned, not raised


if __name__ == "__main__":
    main()
