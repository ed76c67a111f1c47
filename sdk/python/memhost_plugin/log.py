"""Logging that reaches the host as the Go SDK's does: JSON lines on
stderr in hclog's shape, which the host re-logs under the plugin
instance's name at the line's level (docs/protocol.md, "Logging")."""

import contextvars
import datetime
import json
import math
import os
import sys
import threading

LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4}

# The id of the host request the current call serves (gRPC metadata
# memhost-request-id); the server sets it around each call.
request_id = contextvars.ContextVar("memhost_request_id", default="")


class Logger:
    """logger.info("opened store", path=p): one JSON line per call."""

    def __init__(self, stream=None, level=None):
        self._stream = stream or sys.stderr
        self._min = LEVELS.get((level or os.environ.get("MEMHOST_LOG_LEVEL", "info")).lower(), LEVELS["info"])
        self._lock = threading.Lock()

    def log(self, level, message, **fields):
        if LEVELS[level] < self._min:
            return
        now = datetime.datetime.now(datetime.timezone.utc)
        line = {"@level": level, "@message": str(message), "@timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        rid = request_id.get()
        if rid:
            line["request_id"] = rid
        for k, v in fields.items():
            # NaN and the infinities are not JSON: as numbers they would turn
            # the line into text the host logs at info, whatever its level.
            plain = isinstance(v, (str, int, bool, type(None))) or (isinstance(v, float) and math.isfinite(v))
            line[k] = v if plain else str(v)
        data = json.dumps(line, ensure_ascii=False) + "\n"
        # One write per line under a lock, so lines of concurrent calls
        # never interleave; a host that is gone must not kill the plugin.
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def trace(self, message, **fields):
        self.log("trace", message, **fields)

    def debug(self, message, **fields):
        self.log("debug", message, **fields)

    def info(self, message, **fields):
        self.log("info", message, **fields)

    def warn(self, message, **fields):
        self.log("warn", message, **fields)

    def error(self, message, **fields):
        self.log("error", message, **fields)


logger = Logger()
