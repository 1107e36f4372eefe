// Generated from api/tools.json by scripts/gen-tools.mjs (npm run gen): do not edit.
// The agent tools' descriptions and their arguments', as the TypeScript tools show them.

export const TOOL_TEXTS = {
  runtime_exec: {
    description: "Run a shell command in the sandbox, a Linux machine with Python 3, pip, git and curl, and return its exit code, stdout, stderr and whether it timed out.\n\nFiles, installed packages and started servers persist between calls. A failing command is reported through a non-zero exit_code, not as a failed call. Long output keeps only its end. The call waits for the command to end, so a command that does not end by itself (a server, a watcher) is killed at its timeout and returns timed_out true; start such a command in the background instead, for example \"nohup python3 -m http.server 8000 > server.log 2>&1 &\", then read server.log or query it in later calls.",
    parameters: {
      command: "The shell command to run, for example \"python3 main.py\" or \"pip install requests\".",
      cwd: "The directory to run in, absolute or relative to /workspace; null means /workspace.",
      timeout_seconds: "Seconds after which the command is killed; null means 120 seconds.",
    },
  },
  runtime_read_file: {
    description: "Read a text file in the sandbox and return its content.\n\nA long file is cut after its first 20000 bytes, with a note saying so; use runtime_exec with head, tail or sed to read other parts. A binary file gives a note instead of its bytes, and a file that is not there gives \"not found: PATH (no such file or directory)\" as its content.",
    parameters: {
      path: "The file to read, absolute or relative to /workspace.",
    },
  },
  runtime_write_file: {
    description: "Write a text file in the sandbox, replacing it if it exists and making its parent directories, and say what was written.",
    parameters: {
      path: "The file to write, absolute or relative to /workspace.",
      content: "The whole new content of the file.",
    },
  },
  runtime_list_files: {
    description: "List a directory in the sandbox, one entry per file with its name, its type (file, dir, symlink or other) and its size in bytes.\n\nEntries are sorted by name; past 400 of them an entry of type note says how many more there are. A directory that is not there gives one entry of type note whose name is \"not found: PATH (no such file or directory)\".",
    parameters: {
      path: "The directory to list, absolute or relative to /workspace; null means /workspace.",
    },
  },
  runtime_run_code: {
    description: "Run Python code in the sandbox like a notebook cell, in a persistent IPython kernel, and return its results, stdout, stderr and error.\n\nVariables, imports and functions stay defined between calls. The value of the last expression comes back in results as text, and so do displayed objects and matplotlib figures, each saying in which other formats (png, html and so on) it exists. Lines such as \"!ls\" or \"%pip install requests\" work as in a notebook. An exception in the code is returned in error with its name, value and traceback, not as a failed call; a cell still running at its timeout is interrupted with the error name TimeoutError and the kernel keeps its state. Long output keeps only its end.",
    parameters: {
      code: "The Python code to run, for example \"import pandas as pd\" followed by lines that use it.",
      timeout_seconds: "Seconds after which the cell is interrupted; null means 120 seconds.",
    },
  },
} as const;
