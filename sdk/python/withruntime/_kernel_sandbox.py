"""The sandbox as seen from inside itself: what ``withruntime.tools`` needs of
a Sandbox (``exec``, ``files.write``, ``files.list``, ``files._read_head``),
done with local system calls.

withruntime.smolagents ships this module's source and tools.py's into the
sandbox's kernel and binds ``sandbox_tools`` to a :class:`KernelSandbox`, so
code there calls ``runtime_exec`` and the others with the same results and
caps as the tools outside, without an API key or a network. It must stay
standard library only, with no relative import outside
runtime_tools_cell (which only the SDK calls), and run on the image's
Python.
"""

import os
import select
import signal
import stat
import subprocess
import tempfile
import threading

WORKSPACE = "/workspace"
# Bytes of each output stream kept (the last ones); the tools keep less.
_KEEP = 4 * 1024 * 1024


class _Result:
    def __init__(self, exit_code, stdout, stderr, timed_out, stdout_truncated, stderr_truncated):
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.stdout_truncated = stdout_truncated
        self.stderr_truncated = stderr_truncated


class _Entry:
    def __init__(self, name, path, type, size):
        self.name = name
        self.path = path
        self.type = type
        self.size = size


class _Tail:
    """Reads a pipe, keeping the last _KEEP bytes, until its end or stop():
    a background child may hold the pipe open for ever, and must then pin
    neither a thread nor a buffer."""

    def __init__(self, pipe):
        self.data = bytearray()
        self.truncated = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True, name="withruntime-exec-reader")
        self.thread.start()

    def _read(self, pipe):
        # The reader closes its pipe: closing it from another thread while a
        # read is blocked would wait for that read.
        with pipe:
            self._read_all(pipe.fileno())

    def _read_all(self, fd):
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                with self._lock:
                    self.data += chunk
                    if len(self.data) > 2 * _KEEP:
                        del self.data[: len(self.data) - _KEEP]
                        self.truncated = True
        except (OSError, ValueError):
            return

    def finish(self, wait):
        """Waits up to wait seconds for the pipe's end, then stops reading
        (as the agent's exec does, one second after the command ended):
        a child still writing to the closed pipe gets SIGPIPE."""
        self.thread.join(timeout=wait)
        self._stop.set()
        self.thread.join()

    def text(self):
        with self._lock:
            if len(self.data) > _KEEP:
                del self.data[: len(self.data) - _KEEP]
                self.truncated = True
            return bytes(self.data).decode("utf-8", "replace")


class _Files:
    def __init__(self, workspace):
        self.workspace = workspace

    def abs(self, path):
        path = os.fspath(path or ".")
        return os.path.normpath(path if path.startswith("/") else os.path.join(self.workspace, path))

    def _read_head(self, path, limit):
        with open(self.abs(path), "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read(limit)
            total = st.st_size if stat.S_ISREG(st.st_mode) else (None if f.read(1) else len(data))
        return data, total

    def write(self, path, data, mode=0o644):
        target = self.abs(path)
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        # A new file renamed over the path: a symlink there is replaced, never
        # written through (as the API's write does).
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".withruntime-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            os.chmod(tmp, mode & 0o777)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return _Entry(os.path.basename(target), target, "file", len(body))

    def list(self, path="."):
        out = []
        with os.scandir(self.abs(path)) as it:
            for e in it:
                if e.is_symlink():
                    kind = "symlink"
                elif e.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif e.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                try:
                    size = e.stat(follow_symlinks=False).st_size  # lstat, as the API reports it
                except OSError:
                    size = 0
                out.append(_Entry(e.name, e.path, kind, size))
        return out


class KernelSandbox:
    """exec and files on the machine this code runs on."""

    def __init__(self, workspace=WORKSPACE):
        self.files = _Files(workspace)

    def exec(self, cmd, cwd=None, timeout_ms=None):
        """Run cmd under /bin/sh -c in its own process group; at the timeout
        the whole group is killed (exit code 137, timed_out True), as the
        agent does for the API's exec."""
        proc = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            cwd=self.files.abs(cwd or "."),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out, err = _Tail(proc.stdout), _Tail(proc.stderr)
        timed_out = False
        try:
            proc.wait(timeout=None if not timeout_ms else timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        except BaseException:
            # An interrupted cell (KeyboardInterrupt) takes its command along.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            raise
        # A background child that kept the pipes open must not hold the call.
        out.finish(1)
        err.finish(1)
        code = proc.returncode
        code = 128 - code if code < 0 else code
        return _Result(code, out.text(), err.text(), timed_out, out.truncated, err.truncated)


def runtime_tools_cell(names, workspace=WORKSPACE):
    """A cell that loads tools.py and this module from their source into
    private modules and defines the functions ``names`` of
    ``sandbox_tools`` bound to a KernelSandbox: the caps and results are
    tools.py's own. Run outside the sandbox (by the SDK)."""
    import inspect
    import sys

    from . import tools

    tools_src = inspect.getsource(tools)
    local_src = inspect.getsource(sys.modules[__name__])
    names = list(names)
    return f"""
def _withruntime_runtime_tools():
    import types
    def load(name, src):
        m = types.ModuleType(name)
        exec(compile(src, name + ".py", "exec"), m.__dict__)
        return m
    local = load("withruntime_kernel_sandbox", {local_src!r})
    tools = load("withruntime_tools", {tools_src!r})
    fns = {{f.__name__: f for f in tools.sandbox_tools(local.KernelSandbox({workspace!r}))}}
    return {{n: fns[n] for n in {names!r}}}
globals().update(_withruntime_runtime_tools())
del _withruntime_runtime_tools
"""
