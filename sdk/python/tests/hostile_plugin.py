"""A provider whose recall misbehaves on cue, served as a plugin process by
test_hardening: the query names what it does."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from memhost_plugin import Info, errors, serve  # noqa: E402

RELEASE = threading.Event()  # never set: "block" blocks for good
REINDEXED = threading.Event()  # set by a recall of "finish reindex"


class Hostile:
    def info(self):
        return Info(name="hostile", version="1.0.0", capabilities=["reindex"])

    def configure(self, config, host):
        pass

    def recall(self, q):
        if q.query == "exit":
            sys.exit(3)
        if q.query == "raise":
            raise RuntimeError("deliberate")
        if q.query == "surrogate":
            raise errors.NotFound("no store at " + os.fsdecode(b"/data/\xff.db"))
        if q.query == "keyerror":
            return {}["secret"]
        if q.query == "empty":
            raise RuntimeError()
        if q.query == "block":
            RELEASE.wait()
        if q.query == "slow":
            RELEASE.wait(0.3)
        if q.query == "finish reindex":
            REINDEXED.set()
        if q.query == "print":
            print("printed by recall")
        return []

    def reindex(self, realm, progress):
        # Half done, then waits for the test to let it finish: the host
        # must see the progress while the rebuild still runs.
        progress(1, 2)
        REINDEXED.wait()
        progress(2, 2)
        return 2


if __name__ == "__main__":
    print("loading the hostile plugin")  # stdout, before the handshake line
    serve(Hostile())
