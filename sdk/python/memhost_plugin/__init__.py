"""The memhost plugin SDK for Python: serve a provider (or a resolver or
compactor) written in Python to memhost over the plugin protocol
(docs/protocol.md). A provider is any object with info(), configure()
and recall(); each optional capability is one more method (server.py's
CAPABILITIES). KVProvider (kv.py) is a complete provider over a store
that only loads, puts and deletes."""

from .calls import check_deadline, time_remaining
from .errors import (Cancelled, Conflict, DeadlineExceeded, FieldError, InvalidArgument, MemhostError, NotFound,
                     PermissionDenied, ReadOnly, StorageFull, TooLarge, Unavailable, Unsupported)
from .kv import KVProvider, decode_config
from .log import logger
from .records import Record, new_record_id, now_ms, prepare, prepare_import, validate_record
from .server import HostInfo, Info, LedgerEntry, ManifestQuery, ManifestRow, RecallQuery, check_plugin, serve

__all__ = [
    "Cancelled", "Conflict", "DeadlineExceeded", "FieldError", "HostInfo", "Info", "InvalidArgument", "KVProvider", "LedgerEntry",
    "ManifestQuery", "ManifestRow", "MemhostError", "NotFound", "PermissionDenied", "ReadOnly", "RecallQuery", "Record",
    "StorageFull", "TooLarge", "Unavailable", "Unsupported", "check_deadline", "check_plugin", "decode_config", "logger",
    "new_record_id", "now_ms", "prepare", "prepare_import", "serve", "time_remaining", "validate_record",
]
