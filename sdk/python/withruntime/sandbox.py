"""Sandboxes: create, connect, lease, lifecycle and exec."""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, List, Literal, overload

from ._time import parse_time
from ._transport import Transport
from .code import ContextArg, Contexts, Execution, Result, build_code_body, run_code
from .errors import APIError
from .files import Files
from .metrics import SandboxMetric, TimeBound, time_param
from .network import EgressEvent, Network, network_body
from .preview import ExpiresIn, Preview, get_preview, host_of, revoke_previews, set_preview, url_of
from .pty import Pty
from .process import BytesOutputCallback, Command, ExecResult, OutputCallback, Process, build_exec_body, run_stream
from .snapshot import Snapshot
from .template import TemplateInfo, check_template_name

__all__ = ["Sandbox", "SandboxInfo"]

class Forks(List["Sandbox"]):
    """The sandboxes :meth:`Sandbox.fork` started, in a list; ``snapshot``
    is the snapshot they started from when the fork kept it, else None."""

    snapshot: Snapshot | None = None


# Stopping a sandbox that already ended is not a failure of the stop.
_ALREADY_GONE = frozenset({"not_found", "conflict", "lease_ended"})


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as the API shows it (the fields of the API's Sandbox).

    ``state`` is ``starting``, ``running``, ``paused`` or ``ended``;
    ``template`` is the template it started from, as ``name:tag``
    (``default``: the built-in image; ``image`` is its older name);
    ``isolation`` is ``gvisor`` (gVisor's user-space kernel) or ``microvm``
    (a microVM with its own Linux kernel);
    ``end_reason`` (once ended) is ``stopped``, ``lease_ended``,
    ``out_of_memory``, ``spending_limit``, ``retention_ended``,
    ``host_restart``, ``node_lost`` or ``error``. ``node`` names the node
    that holds the sandbox on a many-host installation. ``cost_micros`` is what the sandbox has
    cost so far (its final cost once ended), in USD millionths, and ``usage``
    what it used: ``seconds`` running, ``cpu_seconds`` consumed and
    ``memory_gib_seconds`` (its memory size times its life). ``raw`` keeps
    the whole JSON object, fields newer than this SDK included.
    """

    id: str
    state: str
    isolation: str = ""
    template: str = ""
    image: str = ""
    vcpus: int = 0
    memory_mib: int = 0
    disk_gib: int = 0
    on_lease_end: str = ""
    auto_resume: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    started_at: datetime | None = None
    paused_at: datetime | None = None
    ended_at: datetime | None = None
    lease_ends_at: datetime | None = None
    retention_ends_at: datetime | None = None
    end_reason: str | None = None
    end_message: str | None = None
    cost_micros: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    node: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SandboxInfo:
        return cls(
            id=str(d.get("id", "")),
            state=str(d.get("state", "")),
            isolation=str(d.get("isolation") or ""),
            template=str(d.get("template") or d.get("image") or ""),
            image=str(d.get("image") or ""),
            vcpus=int(d.get("vcpus") or 0),
            memory_mib=int(d.get("memory_mib") or 0),
            disk_gib=int(d.get("disk_gib") or 0),
            on_lease_end=str(d.get("on_lease_end") or ""),
            auto_resume=bool(d.get("auto_resume")),
            metadata=dict(d.get("metadata") or {}),
            network=dict(d.get("network") or {}),
            created_at=parse_time(d.get("created_at")),
            started_at=parse_time(d.get("started_at")),
            paused_at=parse_time(d.get("paused_at")),
            ended_at=parse_time(d.get("ended_at")),
            lease_ends_at=parse_time(d.get("lease_ends_at")),
            retention_ends_at=parse_time(d.get("retention_ends_at")),
            end_reason=d.get("end_reason") or None,
            end_message=d.get("end_message") or None,
            cost_micros=int(d.get("cost_micros") or 0),
            usage=dict(d.get("usage") or {}),
            node=d.get("node") or None,
            raw=dict(d),
        )


class Sandbox:
    """A sandbox: a disposable, isolated Linux machine.

    Make one with :meth:`create` (a context manager that stops it when the
    block ends, error or not) or attach to an existing one with
    :meth:`connect`. Every method is safe to call from several threads.
    """

    def __init__(
        self,
        id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        _transport: Transport | None = None,
        _info: SandboxInfo | None = None,
    ) -> None:
        if not id:
            raise ValueError("sandbox id is empty")
        self._id = id
        self._t = _transport or Transport(base_url, api_key)
        self._info = _info
        self._stopped = False
        self.files = Files(self._t, id)
        """File operations: read, write, list, stat, mkdir, remove, upload, download."""
        self._contexts = Contexts(self._t, id)
        self.pty = Pty(self._t, id)
        """Terminals: ``create(cols=, rows=, on_data=)``, ``connect(pid)``."""

    # -- construction ------------------------------------------------------

    @classmethod
    def create(
        cls,
        *,
        isolation: str | None = None,
        vcpus: int | None = None,
        memory_mib: int | None = None,
        disk_gib: int | None = None,
        timeout_seconds: int | None = None,
        on_lease_end: str | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        template: str | None = None,
        image: str | None = None,
        network: Mapping[str, Any] | None = None,
        max_cost_micros: int | None = None,
        auto_resume: bool | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        snapshot: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> Sandbox:
        """Create a sandbox and wait until it runs.

        Only the options given are sent; the server's defaults apply to the
        rest (2 vCPU, 4 GiB, a 10 GiB disk, a 300 s lease, no network).
        ``isolation`` is ``"microvm"`` (its own Linux kernel) or ``"gvisor"``;
        left out, the server's default (``serve --isolation``); one the server
        does not run is refused with not_supported. ``template`` is the
        template to start from, ``"name"`` or ``"name:tag"`` (see
        :class:`withruntime.Template`; left out, the built-in image); its
        defaults apply where the create leaves an option out; ``image`` is
        its older name. ``disk_gib`` is the root disk's size (1 to 100 GiB by default; the
        server's limits apply, invalid_request otherwise). ``timeout_seconds``
        is the lease; ``on_lease_end`` is ``"stop"`` or ``"pause"``;
        ``network`` is ``{"internet": bool, "allow": [hosts]}``;
        ``max_cost_micros`` refuses the create if its first lease could cost
        more. With ``auto_resume=True`` a paused sandbox (by its lease's
        ``"pause"`` or :meth:`pause`) is resumed by the next exec, file, code,
        preview or port-forward call, which then proceeds; without it such
        calls on a paused sandbox raise conflict. ``volumes`` mounts named
        volumes (see :class:`withruntime.Volume`):
        ``[{"name": "data", "path": "/data", "read_only": False}]``.
        ``snapshot`` (an id of :class:`withruntime.Snapshot`) starts the
        sandbox from it, its processes and memory going on where they were;
        its isolation, template, vCPUs and memory are the snapshot's.
        ``api_key`` and ``base_url`` default to WITHRUNTIME_API_KEY and
        WITHRUNTIME_BASE_URL (then http://127.0.0.1:7878).
        """
        body: dict[str, Any] = {}
        for name, value in (
            ("isolation", isolation),
            ("template", template),
            ("image", image),
            ("vcpus", vcpus),
            ("memory_mib", memory_mib),
            ("disk_gib", disk_gib),
            ("timeout_seconds", timeout_seconds),
            ("on_lease_end", on_lease_end),
            ("max_cost_micros", max_cost_micros),
            ("auto_resume", auto_resume),
            ("snapshot", snapshot),
        ):
            if value is not None:
                body[name] = value
        if env is not None:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if metadata is not None:
            body["metadata"] = {str(k): str(v) for k, v in metadata.items()}
        if network is not None:
            body["network"] = dict(network)
        if volumes is not None:
            body["volumes"] = [dict(v) for v in volumes]
        t = Transport(base_url, api_key)
        info = SandboxInfo.from_json(t.json("POST", "/sandboxes", json_body=body))
        return cls(info.id, _transport=t, _info=info)

    @classmethod
    def connect(cls, id: str, *, api_key: str | None = None, base_url: str | None = None) -> Sandbox:
        """Attach to an existing sandbox (APIError not_found if there is none)."""
        t = Transport(base_url, api_key)
        sbx = cls(id, _transport=t)
        sbx.info()
        return sbx

    @classmethod
    def list(
        cls,
        *,
        state: str | Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        all: bool = False,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> List[SandboxInfo]:
        """The sandboxes this key's account can see, newest first: those not
        ended and those ended in the last 24 hours (all=True: every one),
        only in the given state or states, and only those whose metadata has
        every pair of metadata. Every page is fetched."""
        params: list[tuple[str, str]] = []
        if state:
            params.append(("state", state if isinstance(state, str) else ",".join(state)))
        for k, v in sorted((metadata or {}).items()):
            params.append(("metadata", f"{k}={v}"))
        if all:
            params.append(("all", "true"))
        t = Transport(base_url, api_key)
        out: List[SandboxInfo] = []
        token = ""
        while True:
            q = params + ([("page_token", token)] if token else [])
            path = "/sandboxes" + ("?" + urllib.parse.urlencode(q) if q else "")
            d = t.json("GET", path) or {}
            out.extend(SandboxInfo.from_json(s) for s in d.get("sandboxes") or [])
            token = d.get("next_page_token") or ""
            if not token:
                return out

    # -- lifecycle ---------------------------------------------------------

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self._id

    def _call(self, method: str, suffix: str = "", body: Any = None) -> SandboxInfo:
        d = self._t.json(method, f"/sandboxes/{self._id}{suffix}", json_body=body)
        self._info = SandboxInfo.from_json(d or {})
        return self._info

    def info(self) -> SandboxInfo:
        """The sandbox's current state, lease deadline, end reason, ..."""
        return self._call("GET")

    def extend(self, timeout_seconds: int) -> SandboxInfo:
        """Make the lease last at least timeout_seconds from now; an extend never shortens it."""
        return self._call("POST", "/extend", {"timeout_seconds": int(timeout_seconds)})

    def stop(self) -> SandboxInfo:
        """Stop the sandbox for good (end reason ``stopped``); removes a paused one."""
        info = self._call("POST", "/stop")
        self._stopped = True
        return info

    def pause(self) -> SandboxInfo:
        """Checkpoint disk, memory and processes; ``resume`` continues."""
        return self._call("POST", "/pause")

    def resume(self) -> SandboxInfo:
        """Resume a paused sandbox."""
        return self._call("POST", "/resume")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stopped:
            return
        try:
            self.stop()
        except APIError as e:
            if e.code in _ALREADY_GONE:
                return
            if exc is None:
                raise
            _note(exc, f"withruntime: stopping sandbox {self._id} also failed: {e}")
        except Exception as e:  # noqa: BLE001 - must not mask the block's own exception
            if exc is None:
                raise
            _note(exc, f"withruntime: stopping sandbox {self._id} also failed: {e}")

    def __repr__(self) -> str:
        return f"<Sandbox {self._id}>"

    # -- templates ---------------------------------------------------------

    @overload
    def snapshot(self, template: str) -> TemplateInfo: ...

    @overload
    def snapshot(self, template: None = None, *, name: str | None = None) -> Snapshot: ...

    def snapshot(self, template: str | None = None, *, name: str | None = None) -> TemplateInfo | Snapshot:
        """Without ``template``: save the sandbox whole (memory, processes
        and disk) as a :class:`withruntime.Snapshot` labelled ``name``;
        ``Sandbox.create(snapshot=snap.id)`` starts sandboxes that go on from
        it. The sandbox keeps running (it pauses for the snapshot's
        ``freeze_ms``).

        With ``template`` (``"name"`` or ``"name:tag"``): make that template
        from the sandbox's file system as it is now: what its commands
        installed and wrote; what its processes hold in memory is not kept.
        ``Sandbox.create(template=...)`` starts a new sandbox from it.

        Either call waits as long as the server takes."""
        if template is None:
            body = {"name": name} if name else {}
            d = self._t.json("POST", f"/sandboxes/{self._id}/snapshots", json_body=body, timeout=None)
            return Snapshot.from_json(d or {}, self._t)
        if name is not None:
            raise ValueError("name labels a snapshot; a template's name is template")
        check_template_name(template)
        d = self._t.json("POST", f"/sandboxes/{self._id}/snapshot", json_body={"template": template}, timeout=None)
        return TemplateInfo.from_json(d or {})

    def fork(self, n: int = 1, *, keep_snapshot: bool = False) -> Forks:
        """Start ``n`` sandboxes (1 to 16) from a snapshot of this one taken
        now: each goes on from where this sandbox is, processes and memory
        included, with its own address, disk, boot id and randomness from
        then on. This sandbox runs on. All or none: past the account's
        concurrency nothing starts (APIError concurrency_limit_reached). The
        snapshot is removed once they run unless ``keep_snapshot``; then
        the result's ``snapshot`` is it. The new sandboxes are stopped by
        their own ``stop()`` (or ``with``)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            # The API reads a count of 0 as 1.
            raise APIError("invalid_request", 400, f"fork count {n!r}: want 1 to 16")
        body: dict[str, Any] = {"count": n}
        if keep_snapshot:
            body["keep_snapshot"] = True
        d = self._t.json("POST", f"/sandboxes/{self._id}/fork", json_body=body, timeout=None) or {}
        out = Forks(
            type(self)(info.id, _transport=self._t, _info=info)
            for info in (SandboxInfo.from_json(s) for s in d.get("sandboxes") or [])
        )
        if d.get("snapshot"):
            out.snapshot = Snapshot.from_json(d["snapshot"], self._t)
        return out

    # -- network -----------------------------------------------------------

    def network(self) -> Network:
        """The sandbox's egress policy: ``Network(internet, allow)``."""
        return Network.from_json(self._t.json("GET", f"/sandboxes/{self._id}/network") or {})

    def set_network(self, *, internet: bool, allow: Sequence[str] | None = None) -> SandboxInfo:
        """Replace the egress policy of a running or paused sandbox; new
        connections and DNS queries follow it at once (open ones are not
        cut). ``allow`` (exact names, or ``*.`` and a domain) needs
        ``internet=True``; with internet and no allow, every public
        address is reachable."""
        return self._call("PUT", "/network", network_body(internet, allow))

    def egress(self) -> List[EgressEvent]:
        """The sandbox's egress log: its allowed and refused connections
        and DNS queries, the newest last."""
        d = self._t.json("GET", f"/sandboxes/{self._id}/egress") or {}
        return [EgressEvent.from_json(e) for e in d.get("events") or []]

    # -- metrics -----------------------------------------------------------

    def get_metrics(self, start: TimeBound = None, end: TimeBound = None) -> List[SandboxMetric]:
        """The sandbox's resource samples (CPU, memory, disk, network),
        taken every 5 seconds while it runs, oldest first; ``start`` and
        ``end`` (datetimes, naive ones UTC, or Unix seconds) bound them, None
        leaves that side open. An ended sandbox has none. As E2B's
        ``get_metrics``."""
        query = {k: v for k, v in (("start", time_param(start, "start")), ("end", time_param(end, "end"))) if v}
        d = self._t.json("GET", f"/sandboxes/{self._id}/metrics", query=query or None) or {}
        return [SandboxMetric.from_json(m) for m in d.get("metrics") or []]

    # -- preview URLs ------------------------------------------------------

    def get_host(self, port: int) -> str:
        """Where the sandbox's ``port`` is reached over HTTP, without a
        scheme, as E2B's ``get_host`` gives it: ``{port}-{id}.{domain}``
        where the server serves previews by host name, else
        ``host:port/v1/sandboxes/{id}/ports/{port}`` on the API. A private
        port needs the API key (``Authorization: Bearer``) or a preview
        token (see :meth:`preview_url`); a public one nothing."""
        return host_of(self._t, get_preview(self._t, self._id, port))

    def preview_url(self, port: int, expires_in: ExpiresIn = None) -> str:
        """A URL that opens the sandbox's ``port`` in a browser: unless the
        port is public, it is signed with a new preview token for this
        sandbox and port, valid ``expires_in`` (seconds or a timedelta;
        default a day, 1 minute to 7 days). Its first visit trades the token
        for a cookie and redirects to the URL without it."""
        return url_of(self._t, get_preview(self._t, self._id, port, expires_in))

    def preview(self, port: int, expires_in: ExpiresIn = None) -> Preview:
        """The port's :class:`Preview`: path, host form, whether it is
        public and (when it is not) a new token."""
        return get_preview(self._t, self._id, port, expires_in)

    def expose(self, port: int, public: bool = True) -> Preview:
        """Make ``port`` public (anyone with its URL reaches it, no key or
        token) or, with ``public=False``, private again."""
        return set_preview(self._t, self._id, port, public)

    def revoke_previews(self) -> None:
        """Make every preview token made so far for this sandbox stop
        working, signed URLs and their cookies included. Public ports stay
        public (``expose(port, public=False)`` makes one private)."""
        revoke_previews(self._t, self._id)

    # -- commands ----------------------------------------------------------

    @overload
    def exec(
        self,
        cmd: Command,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        check: bool = False,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        background: Literal[False] = False,
        text: Literal[True] = True,
    ) -> ExecResult[str]: ...

    @overload
    def exec(
        self,
        cmd: Command,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        check: bool = False,
        stdin: str | bytes | None = None,
        on_stdout: BytesOutputCallback | None = None,
        on_stderr: BytesOutputCallback | None = None,
        background: Literal[False] = False,
        *,
        text: Literal[False],
    ) -> ExecResult[bytes]: ...

    @overload
    def exec(
        self,
        cmd: Command,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        check: bool = False,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        *,
        background: Literal[True],
        text: bool = True,
    ) -> Process: ...

    def exec(
        self,
        cmd: Command,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        check: bool = False,
        stdin: str | bytes | None = None,
        on_stdout: Any = None,
        on_stderr: Any = None,
        background: bool = False,
        text: bool = True,
    ) -> ExecResult[Any] | Process:
        """Run a command: a str runs under ``/bin/sh -c``, a list is an argv.

        Output is streamed: ``on_stdout`` / ``on_stderr`` receive text as it
        is produced. Returns an ExecResult (exit_code, stdout, stderr,
        timed_out); a non-zero exit is returned, not raised, unless
        ``check=True`` (then CommandError). ``timeout_ms`` bounds the command
        (default: only the lease). Relative ``cwd`` is under /workspace.

        Output is decoded as UTF-8 (bytes that are not UTF-8 become U+FFFD);
        with ``text=False`` stdout and stderr are the exact ``bytes`` the
        command wrote, and the callbacks receive ``bytes`` too.

        With ``background=True`` returns a Process at once (pid, wait(),
        kill(), stdout/stderr so far); ``check`` then applies to ``wait()``.
        """
        body = build_exec_body(cmd, cwd, env, timeout_ms, stdin, background)
        if background:
            if on_stdout is not None or on_stderr is not None:
                raise ValueError("on_stdout/on_stderr are not used with background=True: read Process.stdout")
            d = self._t.json("POST", f"/sandboxes/{self._id}/exec", json_body=body)
            return Process(self._t, self._id, d or {}, check=check, text=text)
        result = run_stream(self._t, self._id, body, on_stdout, on_stderr, text=text)
        if check:
            result.check()
        return result

    def process(self, pid: int, text: bool = True) -> Process:
        """A handle on a background process by its pid (``text=False``: its
        output is bytes)."""
        d = self._t.json("GET", f"/sandboxes/{self._id}/processes/{int(pid)}")
        return Process(self._t, self._id, d or {}, text=text)

    def processes(self, text: bool = True) -> Sequence[Process]:
        """The sandbox's background processes (``text=False``: their output is
        bytes)."""
        d = self._t.json("GET", f"/sandboxes/{self._id}/processes") or {}
        return [Process(self._t, self._id, p, text=text) for p in d.get("processes") or []]

    # -- code --------------------------------------------------------------

    def run_code(
        self,
        code: str,
        context: ContextArg | None = None,
        timeout_ms: int | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        on_result: Callable[[Result], object] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Execution:
        """Run a cell of Python in a persistent kernel in the sandbox.

        IPython semantics: variables survive between calls in the same
        context, the last expression is the result, ``!cmd`` and ``%magics``
        work, ``display()`` and matplotlib figures come back as rich results.
        ``context`` is a Context (or its id) from ``sbx.contexts.create()``;
        None is the default context, made on first use (with ``env`` added
        to its environment, which only that first call uses). Output is
        streamed to ``on_stdout`` / ``on_stderr``, results to ``on_result``.

        Never raises for the code's own failures: an exception is
        ``execution.error``; a cell over ``timeout_ms`` is interrupted and
        returns an error named ``TimeoutError`` (the context keeps its
        state); a kernel that died is ``DeadKernelError`` (restarted, state
        lost). Platform failures raise APIError / TransportError.
        """
        body = build_code_body(code, context, timeout_ms, env)
        return run_code(self._t, self._id, body, on_stdout, on_stderr, on_result)

    @property
    def contexts(self) -> Contexts:
        """Code contexts (kernels of their own): create, list, restart, remove."""
        return self._contexts


def _note(exc: BaseException, text: str) -> None:
    if sys.version_info >= (3, 11):
        exc.add_note(text)
