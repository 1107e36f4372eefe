"""The code driver: runs one IPython kernel for the sandbox agent.

The agent starts one driver per code context and speaks JSON lines with it.
In on stdin: {"op": "execute", "id": N, "code": "..."} and
{"op": "interrupt", "id": N}. Out on stdout: {"type": "ready"} once the
kernel answers, then per cell "stdout"/"stderr"/"result"/"exception"
events and one "end" (or "dead" when the kernel died, after which the
driver exits). {"type": "fatal", "message": "..."} says the kernel could
not start. The agent bounds everything again: these bounds only keep the
lines small.
"""

import json
import os
import queue
import re
import sys
import threading

# The protocol keeps its own copies of stdin and stdout; fds 0 and 1 become
# /dev/null and stderr, so that nothing else (the kernel inherits them, a
# library may print) can write into the protocol.
_out = os.fdopen(os.dup(1), "wb")
_in = os.fdopen(os.dup(0), "rb")
os.dup2(2, 1)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
sys.stdout = sys.stderr

TEXT_MAX = 32 << 10  # bytes of UTF-8 an event
FIELD_MAX = 4 << 20
LINE_BUDGET = 7 << 20
TRACEBACK_MAX = 512 << 10
VALUE_MAX = 256 << 10
NAME_MAX = 1 << 10
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
MIME = [
    ("text/plain", "text"),
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("text/latex", "latex"),
    ("application/javascript", "javascript"),
    ("application/json", "json"),
]


def emit(ev):
    try:
        _out.write(json.dumps(ev, ensure_ascii=True).encode("ascii") + b"\n")
        _out.flush()
    except (BrokenPipeError, OSError):
        os._exit(1)


def encoded_len(v):
    return len(json.dumps(v, ensure_ascii=True))


def result(data, main):
    r, dropped = {}, 0
    for mime, key in MIME:
        if mime not in data:
            continue
        v = data[mime]
        if key != "json":
            if isinstance(v, list):
                v = "".join(str(x) for x in v)
            elif not isinstance(v, str):
                v = str(v)
            if key in ("png", "jpeg"):
                v = "".join(v.split())
            size = len(v.encode("utf-8", "surrogatepass"))
        else:
            size = len(json.dumps(v))
        if size > FIELD_MAX:
            dropped += size
            continue
        r[key] = v
    # Many fields under the bound can still make one line too long.
    while r and encoded_len(r) > LINE_BUDGET:
        key = max(r, key=lambda k: encoded_len(r[k]))
        dropped += encoded_len(r.pop(key))
    if dropped:
        r["text"] = "[result of %d bytes omitted: larger than 4 MiB]" % dropped
    if main:
        r["is_main_result"] = True
    return r


def split_text(text):
    """Cuts text into parts of at most TEXT_MAX bytes of UTF-8."""
    b = text.encode("utf-8", "surrogatepass")
    while b:
        cut = min(len(b), TEXT_MAX)
        while cut < len(b) and cut > 0 and (b[cut] & 0xC0) == 0x80:
            cut -= 1  # not inside a character
        yield b[:cut].decode("utf-8", "surrogatepass")
        b = b[cut:]


def clip(s, n, keep_end=False):
    if len(s) <= n:
        return s
    return "..." + s[-n:] if keep_end else s[:n] + "..."


def exception(c):
    tb = ANSI.sub("", "\n".join(str(x) for x in c.get("traceback") or []))
    return {
        "name": clip(ANSI.sub("", str(c.get("ename", ""))), NAME_MAX),
        "value": clip(ANSI.sub("", str(c.get("evalue", ""))), VALUE_MAX),
        "traceback": clip(tb, TRACEBACK_MAX, keep_end=True),
    }


ops = queue.Queue()


def read_ops():
    for line in _in:
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if isinstance(op, dict):
            ops.put(op)
    ops.put(None)


def user_site():
    """Makes the user's site-packages exist before the kernel starts: Python
    puts it on sys.path only if it exists then, and `!pip install --user`
    must be importable in the same kernel."""
    import site

    try:
        os.makedirs(site.getusersitepackages(), exist_ok=True)
    except OSError as e:
        print("driver: user site: %s" % e, file=sys.stderr)


def start():
    from jupyter_client import KernelManager

    user_site()
    env = dict(os.environ)
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # Unix sockets in a directory of this driver's own, not loopback TCP
    # ports: jupyter_client picks free ports by closing them before the
    # kernel binds, and kernels starting at once then collide.
    import tempfile
    sockets = tempfile.mkdtemp(prefix="wr-kernel-")
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "k"))
    km.start_kernel(extra_arguments=["--InteractiveShell.colors=NoColor"], env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def run(km, kc, cell_id, code):
    """Runs one cell; False when the kernel died or the agent left."""
    if not km.is_alive():
        emit({"type": "dead"})
        return False
    while True:  # replies left over from an earlier cell
        try:
            kc.get_shell_msg(timeout=0)
        except queue.Empty:
            break
    msg_id = kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
    cell = {"count": 0, "idle": False}
    while not cell["idle"]:
        while True:
            try:
                op = ops.get_nowait()
            except queue.Empty:
                break
            if op is None:
                return False
            if op.get("op") == "interrupt" and op.get("id") == cell_id:
                try:
                    km.interrupt_kernel()
                except Exception as e:  # the kernel may be gone already
                    print("driver: interrupt: %s" % e, file=sys.stderr)
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            if not km.is_alive():
                # What it sent before it died still counts.
                while True:
                    try:
                        msg = kc.get_iopub_msg(timeout=0.2)
                    except queue.Empty:
                        break
                    handle(msg, msg_id, cell)
                emit({"type": "dead"})
                return False
            continue
        handle(msg, msg_id, cell)
    try:
        reply = kc.get_shell_msg(timeout=2)
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            cell["count"] = reply.get("content", {}).get("execution_count") or cell["count"]
    except queue.Empty:
        pass
    emit({"type": "end", "execution_count": cell["count"]})
    return True


def handle(msg, msg_id, cell):
    """Passes on one iopub message of the cell msg_id."""
    if msg.get("parent_header", {}).get("msg_id") != msg_id:
        return
    t, c = msg.get("msg_type"), msg.get("content", {})
    if t == "stream":
        kind = "stderr" if c.get("name") == "stderr" else "stdout"
        for part in split_text(str(c.get("text", ""))):
            emit({"type": kind, "text": part})
    elif t in ("execute_result", "display_data", "update_display_data"):
        emit({"type": "result", "result": result(c.get("data") or {}, t == "execute_result")})
    elif t == "error":
        emit({"type": "exception", "exception": exception(c)})
    elif t == "execute_input":
        cell["count"] = c.get("execution_count") or cell["count"]
    elif t == "status" and c.get("execution_state") == "idle":
        cell["idle"] = True


def main():
    threading.Thread(target=read_ops, daemon=True).start()
    try:
        km, kc = start()
    except Exception as e:
        emit({"type": "fatal", "message": "%s: %s" % (type(e).__name__, e)})
        return 1
    emit({"type": "ready"})
    try:
        while True:
            op = ops.get()
            if op is None:
                break
            if op.get("op") != "execute":
                continue
            if not run(km, kc, op.get("id"), str(op.get("code", ""))):
                break
    finally:
        try:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
