/**
 * The errors of the SDK. Every error it throws for a platform problem is a
 * WithruntimeError; three kinds matter to callers:
 *
 * - APIError: the server answered and refused (`code` is one of the API's
 *   stable error codes, `status` the HTTP status);
 * - CommandError: `exec(..., { check: true })` ran a command that exited
 *   with a non-zero code or timed out (`result` holds the whole ExecResult);
 * - TransportError: the server could not be reached, or a stream broke
 *   before it said how it ended.
 */

import type { ExecResult } from "./process.js";

/** The stable error codes of the API and the HTTP status each comes with. */
export const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  max_cost_exceeded: 402,
  spending_limit_reached: 402,
  trial_exhausted: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  lease_ended: 409,
  payload_too_large: 413,
  not_supported: 422,
  concurrency_limit_reached: 429,
  rate_limited: 429,
  internal: 500,
  bad_gateway: 502,
  capacity_exhausted: 503,
};

/** One of the API's stable error codes (a newer server may send others). */
export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "max_cost_exceeded"
  | "spending_limit_reached"
  | "trial_exhausted"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "lease_ended"
  | "payload_too_large"
  | "not_supported"
  | "concurrency_limit_reached"
  | "rate_limited"
  | "internal"
  | "bad_gateway"
  | "capacity_exhausted"
  | (string & {});

// Used only when an error answer carries no JSON error body (a proxy in
// front of the server, say): the most likely code for the status.
const CODE_OF_STATUS: Readonly<Record<number, string>> = {
  400: "invalid_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  409: "conflict",
  413: "payload_too_large",
  422: "not_supported",
  429: "rate_limited",
  503: "capacity_exhausted",
};

/** The code to report for an error answer that did not name one. */
export function codeForStatus(status: number): string {
  return CODE_OF_STATUS[status] ?? (status >= 400 && status < 500 ? "invalid_request" : "internal");
}

/** Base class of every error the SDK throws. */
export class WithruntimeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The server refused a request. `code` is the stable error code
 * (`not_found`, `conflict`, `lease_ended`, ...), `status` the HTTP status
 * that came with it (0 when the error arrived inside a stream whose status
 * was already 200 and the code is not a known one), `message` the server's
 * explanation for people (the stack trace's first line also names the code).
 */
export class APIError extends WithruntimeError {
  readonly code: ErrorCode;
  readonly status: number;

  constructor(code: string, status: number, message: string) {
    // The stack's header is taken from this text; `message` then keeps only
    // the server's words, as in the other clients.
    super(describe(code, status, message));
    this.code = code;
    this.status = status;
    this.message = message;
  }

  override toString(): string {
    return `${this.name}: ${describe(this.code, this.status, this.message)}`;
  }
}

function describe(code: string, status: number, message: string): string {
  return status ? `${code} (${status}): ${message}` : `${code}: ${message}`;
}

/**
 * A command run with `check: true` exited with a non-zero code or timed out.
 * `result` is the ExecResult, output included.
 */
export class CommandError extends WithruntimeError {
  readonly result: ExecResult;

  constructor(result: ExecResult) {
    const head = result.timedOut
      ? `command timed out (exit code ${result.exitCode})`
      : `command exited with code ${result.exitCode}`;
    const stderr = typeof result.stderr === "string" ? result.stderr : new TextDecoder().decode(result.stderr);
    const tail = stderr.trim().slice(-2000);
    super(tail ? `${head}: ${tail}` : head);
    this.result = result;
  }
}

/** The server could not be reached, or a stream broke before its end. */
export class TransportError extends WithruntimeError {}

/** An APIError from an ErrorDetail object ({ code, message }). */
export function apiErrorFromDetail(detail: unknown, status = 0): APIError {
  const d = (detail && typeof detail === "object" ? detail : {}) as { code?: unknown; message?: unknown };
  const code = d.code ? String(d.code) : status ? codeForStatus(status) : "internal";
  const message = d.message ? String(d.message) : "no message";
  return new APIError(code, status || STATUS_OF_CODE[code] || 0, message);
}
