"""A KVProvider on a dict, served as a plugin process by test_server."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from memhost_plugin import KVProvider, decode_config, errors, logger, serve  # noqa: E402


class MemStore:
    def __init__(self, fail):
        self.recs, self.fail = {}, fail

    def load(self):
        return list(self.recs.values())

    def put(self, records):
        if any(r.title == self.fail for r in records):
            raise errors.StorageFull("no space left for " + self.fail)
        for r in records:
            self.recs[(r.realm, r.id)] = r

    def delete(self, keys):
        for k in keys:
            self.recs.pop(k, None)


def open_store(config):
    cfg = decode_config(config, {"fail_title": ""})
    logger.info("configured", fail_title=cfg["fail_title"])
    return MemStore(cfg["fail_title"])


if __name__ == "__main__":
    serve(KVProvider("memtest", "1.2.3", open_store))
