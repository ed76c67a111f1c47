"""The live server the tests run against (started by clients/testserver.py)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
CLIENTS = os.path.dirname(PACKAGE_ROOT)
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)


@dataclass(frozen=True)
class Live:
    url: str
    app_token: str
    agent_token: str


def live() -> Live:
    """The server's address and tokens; missing ones are an error, never a skip."""
    names = ("MEMHOST_TEST_URL", "MEMHOST_TEST_APP_TOKEN", "MEMHOST_TEST_AGENT_TOKEN")
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} unset: run the tests through clients/testserver.py "
            "(make clients-test), which starts a live memhost serve"
        )
    return Live(*(os.environ[n] for n in names))
