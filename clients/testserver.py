#!/usr/bin/env python3
"""Runs a command against a fresh, live `memhost serve`.

    python3 clients/testserver.py [--memhost bin/memhost] -- COMMAND [ARGS...]

Starts bin/memhost serve on a free loopback port with a temporary data
directory and a config holding an application token (realms default,
other and copy) and an agent token (realm default), waits until it is ready, runs
COMMAND with

    MEMHOST_TEST_URL          the server's base URL
    MEMHOST_TEST_APP_TOKEN    the application token's secret
    MEMHOST_TEST_AGENT_TOKEN  the agent token's secret

and stops the server. The exit status is COMMAND's; the server's log is
printed when COMMAND fails or the server does not start.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTENING = re.compile(r"memhost listening:? .*?\baddr=(\S+)")
START_TIMEOUT = 120.0  # seconds: the plugins start cold on a busy machine

CONFIG = """\
listen     = "127.0.0.1:0"
plugin_dir = "{plugin_dir}"
data_dir   = "{data_dir}"

compactor "summary" {{
  plugin = "template"
}}
coordinator {{
  compactor = "summary"
}}

token "app" {{
  secret_env = "MEMHOST_TEST_APP_SECRET"
  realms     = ["default", "other", "copy"]
  role       = "application"
}}
token "agent" {{
  secret_env = "MEMHOST_TEST_AGENT_SECRET"
  realms     = ["default"]
}}
"""


def stop(signum: int, _frame: object) -> None:
    # A SIGTERM (make's timeout) unwinds like an exception, so the server
    # and the command are stopped and the data directory removed.
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, stop)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memhost", default=os.path.join(ROOT, "bin", "memhost"))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    memhost = os.path.abspath(args.memhost)
    if not os.access(memhost, os.X_OK):
        print(f"testserver: {memhost} is missing: run `make build` first", file=sys.stderr)
        return 2

    tmp = tempfile.mkdtemp(prefix="memhost-clients-")
    try:
        return run(memhost, tmp, command)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(memhost: str, tmp: str, command: list[str]) -> int:
    config = os.path.join(tmp, "memhost.hcl")
    with open(config, "w", encoding="utf-8") as f:
        f.write(
            CONFIG.format(
                plugin_dir=os.path.join(os.path.dirname(memhost), "plugins"),
                data_dir=os.path.join(tmp, "data"),
            )
        )
    app, agent = secrets.token_hex(16), secrets.token_hex(16)
    env = dict(os.environ, MEMHOST_TEST_APP_SECRET=app, MEMHOST_TEST_AGENT_SECRET=agent)
    server = subprocess.Popen(
        [memhost, "serve", "--config", config],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    found = threading.Event()
    addr: list[str] = []

    def read_log() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            log.append(line)
            m = LISTENING.search(line)
            if m and not found.is_set():
                addr.append(m.group(1))
                found.set()
        found.set()

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        if not found.wait(START_TIMEOUT) or not addr:
            print(f"testserver: memhost serve did not start listening:\n{''.join(log)}", file=sys.stderr)
            return 2
        url = "http://" + addr[0]
        if not wait_ready(url, app):
            print(f"testserver: memhost serve at {url} did not get ready:\n{''.join(log)}", file=sys.stderr)
            return 2
        child_env = dict(
            os.environ,
            MEMHOST_TEST_URL=url,
            MEMHOST_TEST_APP_TOKEN=app,
            MEMHOST_TEST_AGENT_TOKEN=agent,
        )
        child = subprocess.Popen(command, env=child_env)
        try:
            code = child.wait()
        finally:
            if child.poll() is None:
                child.terminate()
                child.wait()
        if code != 0:
            print(f"testserver: {' '.join(command)} failed ({code}); server log:\n{''.join(log)}", file=sys.stderr)
        return code
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        reader.join(5)


def wait_ready(url: str, token: str) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    req = urllib.request.Request(url + "/readyz", headers={"Authorization": "Bearer " + token})
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


if __name__ == "__main__":
    sys.exit(main())
