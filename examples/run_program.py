"""Upload a whole directory into a sandbox and run a program there, with its
output streamed as it is produced; then bring the results back.

    PYTHONPATH=sdk/python python3 examples/run_program.py [DIR [COMMAND...]]

With no DIR, a small demo project is made in a temporary directory. The
exit status is the program's own.
"""

import os
import sys
import tempfile

from withruntime import Sandbox

DEMO = {
    "main.py": (
        "import sys, time\n"
        "from helpers.greet import greet\n"
        "for i in range(3):\n"
        "    print(greet(i), flush=True)\n"
        "    time.sleep(0.3)\n"
        "print('warning: demo ends', file=sys.stderr)\n"
        "open('out/result.txt', 'w').write('42\\n')\n"
    ),
    "helpers/__init__.py": "",
    "helpers/greet.py": "def greet(i):\n    return f'step {i}: hello from the sandbox'\n",
    "out/.keep": "",
}


def make_demo(root: str) -> None:
    for rel, text in DEMO.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def main(argv: list) -> int:
    tmp = tempfile.mkdtemp(prefix="withruntime-demo-")
    project = argv[0] if argv else os.path.join(tmp, "project")
    command = argv[1:] or ["python3", "main.py"]
    if not argv:
        make_demo(project)

    with Sandbox.create(timeout_seconds=600) as sbx:
        sent = sbx.files.upload(project, "/workspace/project")
        print(f"uploaded {sent.files} files ({sent.bytes} bytes)", file=sys.stderr)
        run = sbx.exec(
            command,
            cwd="/workspace/project",
            on_stdout=sys.stdout.write,  # streamed as it is produced
            on_stderr=sys.stderr.write,
        )
        sys.stdout.flush()
        if sbx.files.exists("/workspace/project/out"):
            got = sbx.files.download("/workspace/project/out", os.path.join(tmp, "out"))
            print(f"downloaded {got.files} files into {os.path.join(tmp, 'out')}", file=sys.stderr)
        print(f"exit code {run.exit_code}, timed out: {run.timed_out}", file=sys.stderr)
        return run.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
