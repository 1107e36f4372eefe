/** Running commands: the exec stream, its result, and background processes. */

/** How a command ended, with its output. */
export interface ExecResult<T extends string | Uint8Array = string> {
  exitCode: number;
  stdout: T;
  stderr: T;
  timedOut: boolean;
}
