"""What a plugin's code may know of the host call it serves: its
deadline, and whether the host ended it already. The server sets them
around each call (server.py _handler)."""

import contextvars
import time

from . import errors

# The monotonic time the current call's deadline falls at; None outside a
# call, or for a call without one.
call_deadline = contextvars.ContextVar("memhost_call_deadline", default=None)

# A threading.Event set once the host ended the current call (it cancelled
# it, or its deadline passed); None outside a call.
call_ended = contextvars.ContextVar("memhost_call_ended", default=None)


def time_remaining():
    """Seconds left before the current call's deadline (None: no deadline,
    or outside a call)."""
    d = call_deadline.get()
    return None if d is None else d - time.monotonic()


def check_deadline():
    """Raises DeadlineExceeded once the current call's deadline passed, and
    Cancelled once the host cancelled it, as sdk.ContextErr does: the host
    has answered its caller or given up already, so work begun now (a
    write waiting for a lock, say) would change what the caller was told
    failed, or was never told at all."""
    left = time_remaining()
    if left is not None and left <= 0:
        raise errors.DeadlineExceeded("the call's deadline passed before its work began")
    ended = call_ended.get()
    if ended is not None and ended.is_set():
        raise errors.Cancelled("the call was cancelled before its work began")
