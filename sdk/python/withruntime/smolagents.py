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

A step runs at most ``step_timeout_seconds`` (default 30, as smolagents'
LocalPythonExecutor): then it is interrupted, the model sees the
TimeoutError as it sees any other error, and the kernel keeps its state.
A kernel that died (or ignored the interrupt) is replaced by a new one:
the executor defines the runtime_* functions, the tools and the agent's
variables in it again and says so in the step's error. A final answer of
any size comes back (a large one through a file in the sandbox). A step's
logs keep their last ``max_print_outputs_length`` characters (default
50,000, as LocalPythonExecutor; smolagents passes the agent's setting only
to executors it makes itself, so give it here).

Needs ``smolagents``, the ``smolagents`` extra (``withruntime sdk python --extra
smolagents`` prints its install); importing ``withruntime`` alone never
imports it.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from smolagents.local_python_executor import CodeOutput
from smolagents.monitoring import AgentLogger, LogLevel
from smolagents.remote_executors import RemotePythonExecutor
from smolagents.tools import Tool, get_tools_definition_code
from smolagents.utils import AgentError

from ._kernel_sandbox import runtime_tools_cell
from .code import Context, Execution
from .errors import APIError
from .sandbox import Sandbox

__all__ = ["WithruntimeExecutor", "RUNTIME_TOOL_NAMES"]

# The functions of withruntime.tools that the kernel defines for itself.
RUNTIME_TOOL_NAMES = ("runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files")

# Seconds a step may run, as smolagents' LocalPythonExecutor's default.
STEP_TIMEOUT_SECONDS = 30
# Characters of a step's logs kept (the last ones), as LocalPythonExecutor.
MAX_PRINT_OUTPUTS_LENGTH = 50_000

# The kernel driver clips an exception's value at 256 KiB (VALUE_MAX in
# internal/agent/kerneldriver.py); a final answer larger than _FINAL_INLINE
# travels as a file whose path follows _FINAL_FILE.
_VALUE_MAX = 256 << 10
_FINAL_INLINE = 64 << 10
_FINAL_FILE = "withruntime-final-answer-file:"

# What the agent says of a kernel it had to replace (DeadKernelError, or a
# TimeoutError whose kernel ignored the interrupt).
_STATE_LOST = "state was lost"

# Wraps the kernel's final_answer (smolagents' patched tool, which raises
# FinalAnswerException(serialized value)): a large value goes to a file
# only the sandbox user reads and the exception carries its path.
_FINAL_ANSWER_CODE = """
def _wr_wrap_final_answer():
    import os, tempfile
    cls = type(final_answer)
    inner = cls.forward
    if getattr(inner, "_withruntime", False):
        return
    def forward(self, *args, **kwargs):
        try:
            return inner(self, *args, **kwargs)
        except BaseException as e:
            value = getattr(e, "value", None)
            if type(e).__name__ != "FinalAnswerException" or not isinstance(value, str) or len(value) <= {inline}:
                raise
            fd, path = tempfile.mkstemp(prefix=".withruntime-final-", dir="/tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(value)
            raise type(e)({prefix!r} + path) from None
    forward._withruntime = True
    cls.forward = forward
_wr_wrap_final_answer()
del _wr_wrap_final_answer
""".format(inline=_FINAL_INLINE, prefix=_FINAL_FILE)

_UNSET: Any = object()

# Stopping a sandbox that already ended is not a failure of the cleanup.
_ALREADY_GONE = frozenset({"not_found", "conflict", "lease_ended"})


# Distribution names whose import name differs: smolagents' send_tools asks
# to install "pillow" for a tool that needs PIL, and a user may name either.
_IMPORT_OF_DIST = {
    "pillow": "PIL",
    "scikit-learn": "sklearn",
    "beautifulsoup4": "bs4",
    "pyyaml": "yaml",
    "opencv-python": "cv2",
}
_DIST_OF_IMPORT = {v: k for k, v in _IMPORT_OF_DIST.items()}

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

    ``step_timeout_seconds`` bounds each code step (default 30; None: only
    the lease); it must be shorter than ``timeout_seconds``.
    ``max_print_outputs_length``: characters of a step's logs kept, the
    last ones (default 50,000). ``timeout_seconds`` is for a sandbox this
    executor creates: giving it with ``sandbox`` is a ValueError.
    """

    def __init__(
        self,
        additional_imports: list[str] | None = None,
        logger: Any = None,
        sandbox: Sandbox | None = None,
        timeout_seconds: int = _UNSET,
        allow_pickle: bool = False,
        step_timeout_seconds: float | None = STEP_TIMEOUT_SECONDS,
        max_print_outputs_length: int | None = None,
        **create_kwargs: Any,
    ) -> None:
        if timeout_seconds is _UNSET:
            timeout_seconds = 900
        elif sandbox is not None:
            raise ValueError("timeout_seconds is the lease of a sandbox the executor creates: not with sandbox=")
        if timeout_seconds is None or int(timeout_seconds) <= 0:
            raise ValueError("timeout_seconds must be positive")
        if step_timeout_seconds is not None:
            if not step_timeout_seconds > 0:
                raise ValueError("step_timeout_seconds must be positive or None")
            if sandbox is None and step_timeout_seconds >= int(timeout_seconds):
                raise ValueError(
                    f"step_timeout_seconds ({step_timeout_seconds}) must be shorter than the lease "
                    f"(timeout_seconds={int(timeout_seconds)})"
                )
        if max_print_outputs_length is None:
            max_print_outputs_length = MAX_PRINT_OUTPUTS_LENGTH
        if int(max_print_outputs_length) <= 0:
            raise ValueError("max_print_outputs_length must be positive")
        super().__init__(list(additional_imports or []), logger or AgentLogger(level=LogLevel.INFO), allow_pickle)
        self.timeout_seconds = int(timeout_seconds)
        self.step_timeout_seconds = step_timeout_seconds
        self.max_print_outputs_length = int(max_print_outputs_length)
        # What was last sent, sent again to a kernel that replaced a dead one.
        self._sent_tools: dict[str, Tool] = {}
        self._sent_variables: dict[str, Any] = {}
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
        timeout_ms = int(self.step_timeout_seconds * 1000) if self.step_timeout_seconds else None
        ex = self.sandbox.run_code(code, context=self.context, timeout_ms=timeout_ms)
        logs = "".join(ex.logs.stdout)
        stderr = "".join(ex.logs.stderr)
        if stderr:
            logs += ("\n" if logs and not logs.endswith("\n") else "") + stderr
        logs = self._keep_tail(logs, "logs")
        if ex.error is not None:
            if ex.error.name == RemotePythonExecutor.FINAL_ANSWER_EXCEPTION:
                answer = self._deserialize_final_answer(self._final_value(ex.error.value), self.allow_pickle)
                return CodeOutput(output=answer, logs=logs, is_final_answer=True)
            value = ex.error.value
            if ex.error.name in ("DeadKernelError", "TimeoutError") and _STATE_LOST in value:
                value += "\n" + self._restore()
            raise AgentError(
                f"{logs}\nExecuting code yielded an error:\n{ex.error.name}\n{value}\n"
                f"{self._keep_tail(ex.error.traceback or '', 'traceback')}",
                self.logger,
            )
        return CodeOutput(output=self._main_output(ex), logs=logs, is_final_answer=False)

    def _keep_tail(self, text: str, what: str) -> str:
        cap = self.max_print_outputs_length
        if len(text) <= cap:
            return text
        return f"[{what} cut: only the last {cap} of {len(text)} characters are shown]\n{text[-cap:]}"

    def _final_value(self, value: str) -> str:
        """The serialized final answer, read back from its file when it
        was too large for the exception's value."""
        if value.startswith(_FINAL_FILE):
            path = value[len(_FINAL_FILE) :]
            text = self.sandbox.files.read(path)
            try:
                self.sandbox.files.remove(path)
            except APIError:
                pass  # a file in the sandbox's /tmp; the sandbox's end removes it
            return text
        if len(value) > _VALUE_MAX:
            raise AgentError(
                f"withruntime: the final answer was cut to {_VALUE_MAX} characters on its way out of the sandbox "
                "(final_answer was not the executor's own): return a shorter answer or write it to a file",
                self.logger,
            )
        return value

    def _restore(self) -> str:
        """Defines the runtime_* functions, tools and variables in a new
        kernel; returns what to tell the model."""
        try:
            self._run(runtime_tools_cell(RUNTIME_TOOL_NAMES), "defining the runtime_* functions")
            if self._sent_tools:
                self._run(get_tools_definition_code(self._sent_tools), "defining the tools")
                if "final_answer" in self._sent_tools:
                    self._run(_FINAL_ANSWER_CODE, "wrapping final_answer")
            if self._sent_variables:
                super().send_variables(self._sent_variables)
        except AgentError as e:
            return f"[withruntime: the kernel was replaced by a new one and defining the tools in it again failed: {e}]"
        return (
            "[withruntime: the kernel was replaced by a new one: the variables, imports and functions of earlier "
            "steps are gone; the tools, the runtime_* functions and the agent's variables were defined again]"
        )

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
        tools = {n: t for n, t in tools.items() if n not in RUNTIME_TOOL_NAMES}
        super().send_tools(tools)
        self._sent_tools = dict(tools)
        if "final_answer" in tools:
            self._run(_FINAL_ANSWER_CODE, "wrapping final_answer")

    def send_variables(self, variables: dict[str, Any]) -> None:
        super().send_variables(variables)
        self._sent_variables = dict(variables)

    def install_packages(self, additional_imports: list[str]) -> list[str]:
        """pip-install the modules of ``additional_imports`` that the sandbox
        lacks ("x.*" is module x; "*" names none; a distribution name such as
        "pillow" is looked for by its import name, PIL); return those asked
        for."""
        mods = []
        for name in additional_imports:
            top = name.split(".", 1)[0].strip()
            if top and top != "*" and top not in mods:
                mods.append(top)
        if not mods:
            return []
        # Look for the import name, install the distribution: "pillow" is
        # there when PIL imports.
        imports = {m: _IMPORT_OF_DIST.get(m.lower(), m) for m in mods}
        out = self._run(_MISSING_CODE.format(mods=sorted(set(imports.values()))), "looking for installed modules")
        lacking = set(json.loads("".join(out.logs.stdout).strip().splitlines()[-1]))
        missing = []
        for m in mods:
            if imports[m] in lacking:
                dist = _DIST_OF_IMPORT.get(imports[m], m)
                if dist not in missing:
                    missing.append(dist)
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
