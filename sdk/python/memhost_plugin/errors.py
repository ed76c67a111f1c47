"""Errors a plugin raises, and how they travel to the host.

Each class is one stable memhost error code; the server answers it as the
gRPC status the host maps back (docs/protocol.md, "Errors"). A FieldError
also names the refused field, as a google.rpc.BadRequest detail.
"""

import errno

import grpc

# The gRPC detail messages are hand-encoded: Debian's python3-protobuf
# ships no google.rpc types, and these four messages are tiny.


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    """A length-delimited field (wire type 2)."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "replace")
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _any(type_name, value):
    return _field(1, "type.googleapis.com/" + type_name) + _field(2, value)


def status_details(code, message, details):
    """A serialised google.rpc.Status for the grpc-status-details-bin trailer."""
    out = _varint(1 << 3) + _varint(code.value[0]) if code.value[0] else b""
    out += _field(2, message)
    for d in details:
        out += _field(3, d)
    return out


class MemhostError(Exception):
    """Base of every error with a memhost code."""

    code = "internal"
    grpc_code = grpc.StatusCode.UNKNOWN

    def details(self):
        return []


def _coded(name, code, grpc_code):
    return type(name, (MemhostError,), {"code": code, "grpc_code": grpc_code, "__module__": __name__})


InvalidArgument = _coded("InvalidArgument", "invalid_argument", grpc.StatusCode.INVALID_ARGUMENT)
TooLarge = _coded("TooLarge", "too_large", grpc.StatusCode.OUT_OF_RANGE)
NotFound = _coded("NotFound", "not_found", grpc.StatusCode.NOT_FOUND)
Conflict = _coded("Conflict", "conflict", grpc.StatusCode.ALREADY_EXISTS)
Unsupported = _coded("Unsupported", "unsupported", grpc.StatusCode.UNIMPLEMENTED)
Unavailable = _coded("Unavailable", "unavailable", grpc.StatusCode.UNAVAILABLE)
DeadlineExceeded = _coded("DeadlineExceeded", "deadline_exceeded", grpc.StatusCode.DEADLINE_EXCEEDED)
Cancelled = _coded("Cancelled", "cancelled", grpc.StatusCode.CANCELLED)
PermissionDenied = _coded("PermissionDenied", "permission_denied", grpc.StatusCode.PERMISSION_DENIED)
ReadOnly = _coded("ReadOnly", "read_only", grpc.StatusCode.FAILED_PRECONDITION)


class StorageFull(MemhostError):
    """The disk or quota is full; it travels with an ErrorInfo that tells it
    from gRPC's own RESOURCE_EXHAUSTED for an oversized message."""

    code, grpc_code = "storage_full", grpc.StatusCode.RESOURCE_EXHAUSTED

    def details(self):
        return [_any("google.rpc.ErrorInfo", _field(1, "STORAGE_FULL") + _field(2, "memhost"))]


def classify(e):
    """e as the memhost error it stands for: an OSError of a full disk or
    quota or file-size limit (ENOSPC, EDQUOT, EFBIG), or an error raised from one (raise ... from,
    as Go's %w), is StorageFull, of a read-only store (EROFS) ReadOnly, so
    the host answers the operator's problem, not an internal error;
    anything else is e."""
    seen, cause = set(), e
    while cause is not None and not isinstance(cause, MemhostError) and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError):
            if cause.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                return StorageFull(str(e))
            if cause.errno == errno.EROFS:
                return ReadOnly(str(e))
        cause = cause.__cause__
    return e


class FieldError(MemhostError):
    """A bad request or record field: invalid, or too large when
    too_large is set. field is its path ("records[2].title")."""

    def __init__(self, field, problem, too_large=False):
        super().__init__(field + ": " + problem)
        self.field, self.problem = field, problem
        if too_large:
            self.code, self.grpc_code = TooLarge.code, TooLarge.grpc_code
        else:
            self.code, self.grpc_code = InvalidArgument.code, InvalidArgument.grpc_code

    def prefixed(self, prefix):
        """The same problem re-homed under a request path."""
        return FieldError(prefix + "." + self.field, self.problem, self.code == TooLarge.code)

    def details(self):
        violation = _field(1, self.field) + _field(2, self.problem)
        return [_any("google.rpc.BadRequest", _field(1, violation))]


def invalid(field, problem):
    return FieldError(field, problem)


def too_large(field, problem):
    return FieldError(field, problem, too_large=True)
