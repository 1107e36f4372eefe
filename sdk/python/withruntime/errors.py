"""The exceptions of the SDK.

Every exception the SDK raises for a platform problem derives from
:class:`Error`. Three kinds matter to callers:

- :class:`APIError`: the server answered and refused (``code`` is one of the
  stable error codes of the API, ``status`` the HTTP status);
- :class:`CommandError`: ``exec(..., check=True)`` ran a command that exited
  with a non-zero code (``result`` holds the whole :class:`ExecResult`);
- :class:`TransportError`: the server could not be reached, or a stream broke
  before it said how it ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .process import ExecResult

__all__ = ["Error", "APIError", "CommandError", "TransportError"]

# The stable error codes of the API and the HTTP status each comes with.
STATUS_OF_CODE = {
    "invalid_request": 400,
    "unauthorized": 401,
    "max_cost_exceeded": 402,
    "spending_limit_reached": 402,
    "trial_exhausted": 402,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "lease_ended": 409,
    "payload_too_large": 413,
    "not_supported": 422,
    "concurrency_limit_reached": 429,
    "rate_limited": 429,
    "internal": 500,
    "bad_gateway": 502,
    "capacity_exhausted": 503,
}

# Used only when an error answer carries no JSON error body (a proxy in
# front of the server, say): the most likely code for the status.
_CODE_OF_STATUS = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "not_supported",
    429: "rate_limited",
    503: "capacity_exhausted",
}


def code_for_status(status: int) -> str:
    """The code to report for an error answer that did not name one."""
    if status in _CODE_OF_STATUS:
        return _CODE_OF_STATUS[status]
    return "invalid_request" if 400 <= status < 500 else "internal"


class Error(Exception):
    """Base class of every error the SDK raises."""


class APIError(Error):
    """The server refused a request.

    ``code`` is the stable error code (``not_found``, ``conflict``,
    ``lease_ended``, ...), ``status`` the HTTP status that came with it (0 when
    the error arrived inside a stream whose status was already 200 and the code
    is not a known one), ``message`` the server's explanation for people.
    """

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(code, status, message)
        self.code = code
        self.status = status
        self.message = message

    def __str__(self) -> str:
        if self.status:
            return f"{self.code} ({self.status}): {self.message}"
        return f"{self.code}: {self.message}"


class CommandError(Error):
    """A command run with ``check=True`` exited with a non-zero code or timed out.

    ``result`` is the :class:`ExecResult`, output included.
    """

    def __init__(self, result: ExecResult) -> None:
        super().__init__(result)
        self.result = result

    def __str__(self) -> str:
        r = self.result
        if r.timed_out:
            head = f"command timed out (exit code {r.exit_code})"
        else:
            head = f"command exited with code {r.exit_code}"
        tail = r.stderr.strip()[-2000:]
        if isinstance(tail, bytes):  # run with text=False
            tail = tail.decode("utf-8", errors="replace")
        return f"{head}: {tail}" if tail else head


class TransportError(Error):
    """The server could not be reached, or a stream broke before its end."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def api_error_from_detail(detail: Any, status: int = 0) -> APIError:
    """Build an APIError from an ``ErrorDetail`` object ({"code", "message"})."""
    if not isinstance(detail, dict):
        detail = {}
    code = detail.get("code") or (code_for_status(status) if status else "internal")
    message = detail.get("message") or "no message"
    if not status:
        status = STATUS_OF_CODE.get(str(code), 0)
    return APIError(str(code), status, str(message))
