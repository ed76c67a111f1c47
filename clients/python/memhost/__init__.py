"""A client for the memhost HTTP API: long-term memory for LLM agents.

Standard library only; importing it touches no network.

    from memhost import Client
    client = Client("http://127.0.0.1:7077", token="...")
"""

from .client import DEFAULT_TIMEOUT, DEFAULT_URL, NOT_COVERED, OPERATIONS, Client
from .errors import (
    CompactionFailed,
    Conflict,
    DeadlineExceeded,
    HistoryMismatch,
    TargetChanged,
    Internal,
    InvalidArgument,
    MemhostError,
    MemhostTransportError,
    MethodNotAllowed,
    NotFound,
    PermissionDenied,
    ProviderUnavailable,
    ReadOnly,
    StorageFull,
    TooLarge,
    TooManyProposals,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    Unsupported,
)

__all__ = [
    "Client",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "NOT_COVERED",
    "OPERATIONS",
    "CompactionFailed",
    "Conflict",
    "DeadlineExceeded",
    "HistoryMismatch",
    "TargetChanged",
    "Internal",
    "InvalidArgument",
    "MemhostError",
    "MemhostTransportError",
    "MethodNotAllowed",
    "NotFound",
    "PermissionDenied",
    "ProviderUnavailable",
    "ReadOnly",
    "StorageFull",
    "TooLarge",
    "TooManyProposals",
    "TooManyRequests",
    "Unauthenticated",
    "Unavailable",
    "Unsupported",
]
