#!/usr/bin/python3 -BEs
"""An example memhost provider in Python: records in a SQLite file (the
standard library's sqlite3), everything else from the SDK's KVProvider."""

import json
import sqlite3

from memhost_plugin import KVProvider, Record, decode_config, errors, logger, serve

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (realm TEXT, id TEXT, data TEXT NOT NULL, PRIMARY KEY (realm, id));
CREATE TABLE IF NOT EXISTS ledger (data TEXT NOT NULL);
"""


class Store:
    """Every change is one transaction, committed durably before it is
    acknowledged (synchronous=FULL), so a kill -9 loses no answered write."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def load(self):
        return [Record.from_dict(json.loads(d)) for (d,) in self.db.execute("SELECT data FROM records")]

    def put(self, records):
        self._write("INSERT OR REPLACE INTO records VALUES (?, ?, ?)",
                    [(r.realm, r.id, json.dumps(r.to_dict())) for r in records])

    def delete(self, keys):
        self._write("DELETE FROM records WHERE realm = ? AND id = ?", keys)

    def append_ledger(self, entries):
        self._write("INSERT INTO ledger VALUES (?)", [(json.dumps(e.__dict__),) for e in entries])

    def _write(self, sql, rows):
        try:
            with self.db:  # BEGIN ... COMMIT, or ROLLBACK on error
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany(sql, rows)
        except sqlite3.OperationalError as e:
            if "disk is full" in str(e) or "database or disk is full" in str(e):
                raise errors.StorageFull(str(e))
            if "readonly" in str(e):
                raise errors.ReadOnly(str(e))
            raise

    def close(self):
        self.db.close()


def open_store(config):
    cfg = decode_config(config, {"path": "memory.sqlite"})
    if not cfg["path"]:
        raise errors.invalid("path", "must not be empty")
    logger.info("store opened", path=cfg["path"])
    return Store(cfg["path"])


if __name__ == "__main__":
    serve(KVProvider("sqlitepy", "0.1.0", open_store, ledger=True))
