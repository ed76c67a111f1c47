"""Logging that reaches the host as the Go SDK's does: JSON lines on
stderr in hclog's shape, which the host re-logs under the plugin
instance's name at the line's level (docs/protocol.md, "Logging")."""

import contextvars
import datetime
import json
import math
import os
import re
import sys
import threading

LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4}

# The host's bounds (sdk/host/log.go): it shows at most MAX_VALUE_BYTES of
# a value, and cuts a line past MAX_LINE_BYTES, which then is no JSON and
# is logged as raw text at info, whatever its level (an error's line with
# a large exception text in it, say).
MAX_VALUE_BYTES = 4 << 10
MAX_LINE_BYTES = 64 << 10
_KEPT = ("@level", "@message", "@timestamp", "request_id")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _dumps(line):
    """line as one line of JSON, a lone surrogate (a file name os.fsdecode
    read from bytes that are not UTF-8) as its JSON escape: as written, the
    stream's error handler would make it 6 bytes that the bound did not
    count, or fail the write."""
    data = json.dumps(line, ensure_ascii=False)
    return _SURROGATES.sub(lambda m: "\\u%04x" % ord(m.group()), data) + "\n"


def _bounded(s):
    """s cut to the MAX_VALUE_BYTES the host shows, at a character's start."""
    data = s.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_VALUE_BYTES:
        return s
    return data[:MAX_VALUE_BYTES].decode("utf-8", "ignore") + "\u2026"

# The id of the host request the current call serves (gRPC metadata
# memhost-request-id); the server sets it around each call.
request_id = contextvars.ContextVar("memhost_request_id", default="")


class Logger:
    """logger.info("opened store", path=p): one JSON line per call."""

    def __init__(self, stream=None, level=None):
        self._stream = stream or sys.stderr
        self._min = LEVELS.get((level or os.environ.get("MEMHOST_LOG_LEVEL", "info")).lower(), LEVELS["info"])
        self._lock = threading.Lock()

    # The parameters are positional-only: a field may have any name, as
    # hclog's keys may (logger.info("compacted", level=3)).
    def log(self, level, message, /, **fields):
        if LEVELS[level] < self._min:
            return
        now = datetime.datetime.now(datetime.timezone.utc)
        line = {"@level": level, "@message": _bounded(str(message)), "@timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        rid = request_id.get()
        if rid:
            line["request_id"] = rid
        for k, v in fields.items():
            # The host reads the line's level, message and time from its
            # "@" keys, the last of a repeated key winning: a field of such
            # a name is kept under plugin@<name>, as the host names one.
            if k.startswith("@"):
                k = "plugin" + k
            # NaN and the infinities are not JSON: as numbers they would turn
            # the line into text the host logs at info, whatever its level.
            plain = isinstance(v, (str, int, bool, type(None))) or (isinstance(v, float) and math.isfinite(v))
            v = v if plain else str(v)
            line[k] = _bounded(v) if isinstance(v, str) else v
        data = _dumps(line)
        if len(data.encode("utf-8")) >= MAX_LINE_BYTES:
            # Still too long (many fields, or escapes): the line keeps its
            # level and message, and says what it dropped.
            kept = {k: line[k] for k in _KEPT if k in line}
            kept["dropped_fields"] = len(line) - len(kept)
            data = _dumps(kept)
        # One write per line under a lock, so lines of concurrent calls
        # never interleave; a host that is gone must not kill the plugin.
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def trace(self, message, /, **fields):
        self.log("trace", message, **fields)

    def debug(self, message, /, **fields):
        self.log("debug", message, **fields)

    def info(self, message, /, **fields):
        self.log("info", message, **fields)

    def warn(self, message, /, **fields):
        self.log("warn", message, **fields)

    def error(self, message, /, **fields):
        self.log("error", message, **fields)


logger = Logger()
