"""Exceptions raised by the memhost client.

An error answer of the API becomes a MemhostError (or the subclass for its
code) carrying the HTTP status, the API's stable code, its message, the
request id, when the refusal names one, the refused field and, on a 429 or
503, the seconds its Retry-After asks the caller to wait. A request
that got no answer (connection refused, timeout, a broken stream) becomes a
MemhostTransportError, which carries the request id the client sent.
"""

from __future__ import annotations

import json
from typing import Any, cast


class MemhostError(Exception):
    """An error answer of the memhost API: {"error": {"code", "message", ...}}."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None = None,
        field: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.field = field
        # Seconds to wait before retrying (the answer's Retry-After), or None.
        self.retry_after = retry_after


class InvalidArgument(MemhostError):
    """400 invalid_argument."""


class Unauthenticated(MemhostError):
    """401 unauthenticated: no token, or an unknown one."""


class PermissionDenied(MemhostError):
    """403 permission_denied: the token may not touch the realm, scope or operation."""


class NotFound(MemhostError):
    """404 not_found."""


class MethodNotAllowed(MemhostError):
    """405 method_not_allowed."""


class Conflict(MemhostError):
    """409 conflict: the state does not allow the request (a running reindex, no pending proposal)."""


class HistoryMismatch(Conflict):
    """409 history_mismatch: the evicted list does not start with the messages already absorbed."""


class TargetChanged(Conflict):
    """409 target_changed: the proposal would now replace another record than the approval's target, or none."""


class TooLarge(MemhostError):
    """413 too_large."""


class TooManyRequests(MemhostError):
    """429 too_many_requests: the token's max_in_flight requests are being served; nothing was done; retry after retry_after."""


class TooManyProposals(MemhostError):
    """429 too_many_proposals: the agent token's pending proposals are at the bound; retry after retry_after."""


class Unsupported(MemhostError):
    """501 unsupported: the provider lacks the capability, or no compactor is configured."""


class CompactionFailed(MemhostError):
    """502 compaction_failed, compaction_empty or compaction_too_large; the watermark stays."""


class Unavailable(MemhostError):
    """503 unavailable: the plugin is down or restarting; retry after retry_after."""


class ProviderUnavailable(Unavailable):
    """503 provider_unavailable: the realm's provider is not serving (/readyz says why)."""


class DeadlineExceeded(MemhostError):
    """504 deadline_exceeded: the plugin did not answer in time."""


class StorageFull(MemhostError):
    """507 storage_full: the write stored nothing; retry once space is freed."""


class ReadOnly(MemhostError):
    """507 read_only: the store's data directory is read-only."""


class Internal(MemhostError):
    """500 internal."""


_BY_CODE: dict[str, type[MemhostError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "history_mismatch": HistoryMismatch,
    "target_changed": TargetChanged,
    "too_large": TooLarge,
    "too_many_requests": TooManyRequests,
    "too_many_proposals": TooManyProposals,
    "unsupported": Unsupported,
    "compaction_failed": CompactionFailed,
    "compaction_empty": CompactionFailed,
    "compaction_too_large": CompactionFailed,
    "unavailable": Unavailable,
    "provider_unavailable": ProviderUnavailable,
    "deadline_exceeded": DeadlineExceeded,
    "storage_full": StorageFull,
    "read_only": ReadOnly,
    "internal": Internal,
}


class MemhostTransportError(Exception):
    """The request got no (complete) answer: connection refused or reset, or a timeout."""

    def __init__(self, message: str, request_id: str, timed_out: bool = False) -> None:
        super().__init__(f"{message} (request {request_id})")
        self.request_id = request_id
        self.timed_out = timed_out


def retry_after_seconds(value: str | None) -> int | None:
    """A Retry-After's seconds; None for none, or for an HTTP date (memhost sends seconds)."""
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


def error_from_body(status: int, error: Any, request_id: str | None, retry_after: int | None = None) -> MemhostError:
    """The exception for a decoded {"error": {...}} object (also a reindex error line)."""
    fields = cast(dict[str, Any], error) if isinstance(error, dict) else {}
    code = fields.get("code")
    if not isinstance(code, str):
        return MemhostError(status, "unknown", f"HTTP {status} without an error body", request_id, retry_after=retry_after)
    cls = _BY_CODE.get(code, MemhostError)
    field = fields.get("field")
    return cls(
        status,
        code,
        str(fields.get("message", "")),
        str(fields.get("request_id") or request_id or "") or None,
        field if isinstance(field, str) else None,
        retry_after,
    )


def error_from_response(status: int, body: bytes, request_id: str | None, retry_after: int | None = None) -> MemhostError:
    """The exception for an error answer; a body that is not the API's error shape keeps its first bytes."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and "error" in decoded:
        return error_from_body(status, decoded["error"], request_id, retry_after)
    text = body[:200].decode("utf-8", "replace").strip()
    message = f"HTTP {status}: {text}" if text else f"HTTP {status}"
    return MemhostError(status, "unknown", message, request_id, retry_after=retry_after)
