"""A smolagents CodeAgent executor that runs the agent's code in a sandbox.

    from smolagents import CodeAgent, InferenceClientModel
    from withruntime.smolagents import WithruntimeExecutor

    agent = CodeAgent(tools=[], model=InferenceClientModel(),
                      executor=WithruntimeExecutor(timeout_seconds=900))
    agent.run("What is the 20th Fibonacci number?")
    agent.cleanup()  # or `with CodeAgent(...) as agent:`; stops the sandbox

Every code step runs with ``sbx.run_code`` in one kernel (a context of its
own), so variables, imports and files survive between steps. The agent's
tools are shipped into the kernel as smolagents' other remote executors
ship them, and ``final_answer`` ends the run with its value. The kernel
also has ``runtime_exec``, ``runtime_read_file``, ``runtime_write_file`` and
``runtime_list_files``: the functions of ``withruntime.tools``, with the same
results and caps, acting on the sandbox itself (a tool of one of those names
given to the agent is served by them).

Needs ``smolagents`` (``pip install 'withruntime[smolagents]'``); importing
``withruntime`` alone never imports it.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from smolagents.local_python_executor import CodeOutput
from smolagents.monitoring import AgentLogger, LogLevel
from smolagents.remote_executors import RemotePythonExecutor
from smolagents.tools import Tool
from smolagents.utils import AgentError

from ._kernel_sandbox import runtime_tools_cell
from .code import Context, Execution
from .errors import APIError
from .sandbox import Sandbox

__all__ = ["WithruntimeExecutor", "RUNTIME_TOOL_NAMES"]

# The functions of withruntime.tools that the kernel defines for itself.
RUNTIME_TOOL_NAMES = ("runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files")

# Stopping a sandbox that already ended is not a failure of the cleanup.
_ALREADY_GONE = frozenset({"not_found", "conflict", "lease_ended"})


# Which of the asked-for modules the kernel lacks; the rest need no install.
_MISSING_CODE = """
import importlib.util as _wr_u
print(__import__("json").dumps([m for m in {mods!r} if _wr_u.find_spec(m) is None]))
del _wr_u
"""

# After a `pip install --user`, a kernel started before the user site
# existed must see it.
_USER_SITE_CODE = """
import importlib as _wr_i, site as _wr_s, sys as _wr_y
if _wr_s.getusersitepackages() not in _wr_y.path:
    _wr_s.addsitedir(_wr_s.getusersitepackages())
_wr_i.invalidate_caches()
del _wr_i, _wr_s, _wr_y
"""


class WithruntimeExecutor(RemotePythonExecutor):
    """Runs a CodeAgent's code steps in a withruntime sandbox.

    ``sandbox``: an existing :class:`withruntime.Sandbox` to run in (never
    stopped by this executor); None creates one with ``create_kwargs``
    (``vcpus``, ``memory_mib``, ``network``, ``image``, ``api_key``, ...,
    as :meth:`Sandbox.create` takes them) and a lease of
    ``timeout_seconds``, renewed before each step, so a program that dies
    leaves a sandbox that stops by itself at most that long after its last
    step; :meth:`cleanup` stops it at once.

    ``additional_imports``: modules the code will import (as
    ``additional_authorized_imports`` names them: ``"numpy"``,
    ``"requests.*"``); those the sandbox lacks are pip-installed into it.
    ``logger``: a smolagents AgentLogger (default: one at INFO level).
    """

    def __init__(
        self,
        additional_imports: list[str] | None = None,
        logger: Any = None,
        sandbox: Sandbox | None = None,
        timeout_seconds: int = 900,
        allow_pickle: bool = False,
        **create_kwargs: Any,
    ) -> None:
        super().__init__(list(additional_imports or []), logger or AgentLogger(level=LogLevel.INFO), allow_pickle)
        if timeout_seconds is None or int(timeout_seconds) <= 0:
            raise ValueError("timeout_seconds must be positive")
        self.timeout_seconds = int(timeout_seconds)
        self._owns_sandbox = sandbox is None
        self._cleaned_up = False
        if sandbox is None:
            create_kwargs.setdefault("metadata", {"created_by": "withruntime.smolagents"})
            sandbox = Sandbox.create(timeout_seconds=self.timeout_seconds, **create_kwargs)
        elif create_kwargs:
            raise TypeError(f"options for a new sandbox given with an existing one: {sorted(create_kwargs)}")
        self.sandbox: Sandbox = sandbox
        try:
            self.context: Context = sandbox.contexts.create()
            self._run(runtime_tools_cell(RUNTIME_TOOL_NAMES), "defining the runtime_* functions")
            self.installed_packages = self.install_packages(self.additional_imports)
        except BaseException:
            self.cleanup()
            raise
        self.logger.log(f"withruntime sandbox {sandbox.id} is running", level=LogLevel.INFO)

    # -- running -----------------------------------------------------------

    def _run(self, code: str, what: str) -> Execution:
        """Run a cell of the executor's own; its failure is a bug or a
        broken sandbox, raised as an AgentError."""
        ex = self.sandbox.run_code(code, context=self.context)
        if ex.error is not None:
            raise AgentError(f"withruntime: {what} failed in sandbox {self.sandbox.id}:\n{ex}", self.logger)
        return ex

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        """Run one code step in the sandbox's kernel."""
        if self._owns_sandbox:
            self.sandbox.extend(self.timeout_seconds)
        ex = self.sandbox.run_code(code, context=self.context)
        logs = "".join(ex.logs.stdout)
        stderr = "".join(ex.logs.stderr)
        if stderr:
            logs += ("\n" if logs and not logs.endswith("\n") else "") + stderr
        if ex.error is not None:
            if ex.error.name == RemotePythonExecutor.FINAL_ANSWER_EXCEPTION:
                answer = self._deserialize_final_answer(ex.error.value, self.allow_pickle)
                return CodeOutput(output=answer, logs=logs, is_final_answer=True)
            raise AgentError(
                f"{logs}\nExecuting code yielded an error:\n{ex.error.name}\n{ex.error.value}\n{ex.error.traceback}",
                self.logger,
            )
        return CodeOutput(output=self._main_output(ex), logs=logs, is_final_answer=False)

    @staticmethod
    def _main_output(ex: Execution) -> Any:
        """The step's value: an image as a PIL image, anything else as the
        text a model reads best, then the other representations."""
        for r in ex.results:
            if not r.is_main_result:
                continue
            for img in (r.png, r.jpeg):
                if img:
                    import PIL.Image  # a dependency of smolagents

                    return PIL.Image.open(io.BytesIO(base64.b64decode(img)))
            if r.text is not None:
                return r.text
            for value in (r.json, r.html, r.markdown, r.latex, r.svg, r.javascript):
                if value is not None:
                    return value
        return None

    # -- tools and packages ------------------------------------------------

    def send_tools(self, tools: dict[str, Tool]) -> None:
        # The runtime_* tools are closures over a client: the kernel's own
        # definitions (the same functions, bound to the sandbox itself)
        # serve those names instead.
        if "runtime_run_code" in tools:
            raise ValueError(
                "runtime_run_code is for agents that run code only through tools: a CodeAgent's own "
                "code already runs in the sandbox's kernel (use sandbox_tools, not code_tools)"
            )
        super().send_tools({n: t for n, t in tools.items() if n not in RUNTIME_TOOL_NAMES})

    def install_packages(self, additional_imports: list[str]) -> list[str]:
        """pip-install the modules of ``additional_imports`` that the sandbox
        lacks ("x.*" is module x; "*" names none); return those asked for."""
        mods = []
        for name in additional_imports:
            top = name.split(".", 1)[0].strip()
            if top and top != "*" and top not in mods:
                mods.append(top)
        if not mods:
            return []
        out = self._run(_MISSING_CODE.format(mods=mods), "looking for installed modules")
        missing = json.loads("".join(out.logs.stdout).strip().splitlines()[-1])
        if missing:
            self.logger.log(f"Installing packages: {', '.join(missing)}", level=LogLevel.INFO)
            result = self.sandbox.exec(["python3", "-m", "pip", "install", "--user", "--quiet", *missing])
            if not result.ok:
                raise AgentError(
                    f"withruntime: pip install {' '.join(missing)} failed (exit code {result.exit_code}):\n"
                    f"{result.stderr[-4000:] or result.stdout[-4000:]}",
                    self.logger,
                )
            self._run(_USER_SITE_CODE, "adding the user site to sys.path")
        return list(additional_imports)

    # -- cleanup -----------------------------------------------------------

    def cleanup(self) -> None:
        """Stop the sandbox this executor made (a sandbox passed in is left
        running; only the executor's context in it is removed)."""
        if self._cleaned_up:
            return
        self._cleaned_up = True
        try:
            if self._owns_sandbox:
                self.logger.log(f"Stopping withruntime sandbox {self.sandbox.id}", level=LogLevel.INFO)
                self.sandbox.stop()
            elif getattr(self, "context", None) is not None:
                self.sandbox.contexts.remove(self.context)
        except APIError as e:
            if e.code not in _ALREADY_GONE:
                self.logger.log_error(f"Error during cleanup of sandbox {self.sandbox.id}: {e}")
        except Exception as e:  # noqa: BLE001 - cleanup is best effort; the lease bounds the rest
            self.logger.log_error(f"Error during cleanup of sandbox {self.sandbox.id}: {e}")

    def delete(self) -> None:
        """The same as cleanup()."""
        self.cleanup()
