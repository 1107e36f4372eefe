"""withruntime: disposable, isolated Linux sandboxes for AI agents.

    from withruntime import Sandbox

    with Sandbox.create(timeout_seconds=600) as sbx:
        sbx.files.write("hello.py", "print('hi')")
        print(sbx.exec("python3 hello.py", check=True).stdout)
        print(sbx.run_code("x = 6 * 7\nx").text)

Configuration comes from WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL, or from
the api_key= and base_url= arguments. Templates (what sandboxes start from):
withruntime.Template. Sandboxes saved whole, to start others from:
withruntime.Snapshot (Sandbox.snapshot(), Sandbox.fork(n)). Secrets, keys, usage and accounts:
withruntime.Client. Agent tools: withruntime.tools; a smolagents CodeAgent
executor: withruntime.smolagents.
Standard library only; Python 3.10 or later.
"""

from ._archive import ArchiveTooLargeError, DestinationError, UnsafeArchiveError
from ._version import __version__
from .admin import Account, Client, Key, SecretInfo, Trial, Usage, UsageRow
from .code import Context, Contexts, Execution, ExecutionError, Logs, Result
from .errors import APIError, CommandError, Error, TransportError
from .files import FileInfo, Files, TransferResult
from .metrics import SandboxMetric
from .network import EgressEvent, Network
from .preview import Preview
from .process import ExecResult, Process
from .pty import Pty, PtyHandle
from .sandbox import Forks, Sandbox, SandboxInfo
from .snapshot import Snapshot
from .template import Template, TemplateDefaults, TemplateInfo
from .volume import Volume, VolumeEntry

__all__ = [
    "__version__",
    "Sandbox",
    "SandboxInfo",
    "Snapshot",
    "Forks",
    "Template",
    "TemplateInfo",
    "TemplateDefaults",
    "Volume",
    "VolumeEntry",
    "ExecResult",
    "Process",
    "Preview",
    "Pty",
    "PtyHandle",
    "Execution",
    "Result",
    "Logs",
    "ExecutionError",
    "Context",
    "Contexts",
    "Files",
    "FileInfo",
    "TransferResult",
    "Network",
    "EgressEvent",
    "SandboxMetric",
    "Client",
    "SecretInfo",
    "Key",
    "Account",
    "Usage",
    "UsageRow",
    "Trial",
    "Error",
    "APIError",
    "CommandError",
    "TransportError",
    "ArchiveTooLargeError",
    "DestinationError",
    "UnsafeArchiveError",
]
