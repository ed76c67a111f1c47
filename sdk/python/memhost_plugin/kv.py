"""A complete provider over a store that can only load, put and delete
records: the Python counterpart of the Go SDK's sdk/kvprovider.

The author writes a Store and an open function for the configuration;
KVProvider does the rest: dedup by content hash, all-or-nothing batches,
supersede, usage counts, the manifest, the archive, and BM25 recall from
an in-memory index. Every record lives in memory, so it suits stores of
some ten thousand records. The Store stays the durable truth: memory
changes only after the Store acknowledged a write.

    class Store:
        def load(self): ...            # every stored record
        def put(self, records): ...    # durably, all or nothing
        def delete(self, keys): ...    # (realm, id) pairs, durably
        def append_ledger(self, entries): ...  # optional (ledger=True)
        def close(self): ...           # optional
"""

import contextlib
import math
import threading

from . import errors, records, text
from .calls import check_deadline
from .records import Record, now_ms
from .server import Info, ManifestRow

HALF_LIFE_MS = 30 * 24 * 3600 * 1000


def decode_config(config, defaults):
    """The configuration over a copy of defaults; an unknown key or a value
    of another type than its default's is refused, naming the key."""
    out = dict(defaults)
    for k, v in config.items():
        if k not in defaults:
            raise errors.invalid(k, "unknown key (known: %s)" % ", ".join(sorted(defaults)))
        want = type(defaults[k])
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if want is float and number:
            # JSON (and HCL's 1) writes a whole number without a point.
            if not math.isfinite(v):
                raise errors.invalid(k, "must be a finite number")
            v = float(v)
        elif want is int and number and not isinstance(v, int):
            raise errors.invalid(k, "must be a whole number")
        elif not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise errors.invalid(k, "must be a %s" % {str: "string", int: "whole number", float: "number", bool: "boolean"}.get(want, want.__name__))
        out[k] = v
    return out


class KVProvider:
    CAPABILITIES = ["write", "fetch", "forget", "manifest", "supersede", "usage", "usage_counts", "archive"]

    def __init__(self, name, version, open, ledger=False, config_schema=None):
        caps = self.CAPABILITIES + (["ledger"] if ledger else [])
        self._info = Info(name=name, version=version, kinds=["provider"], capabilities=caps, config_schema=config_schema)
        self._open, self._lock = open, threading.RLock()
        # One BM25 index per realm: a realm is ranked by its own records'
        # statistics, so another tenant's writes never move its scores.
        self._store, self._recs, self._ix = None, {}, {}

    def info(self):
        return self._info

    @contextlib.contextmanager
    def _held(self):
        """Holds the provider's lock for a call, unless the call's deadline
        passed while it waited: its caller was answered already."""
        with self._lock:
            check_deadline()
            yield

    def configure(self, config, host):
        with self._lock:
            if self._store is not None:
                raise errors.Conflict("already configured")
            store = self._open(config)
            for r in store.load():
                self._apply(r)
            self._store = store

    def close(self):
        with self._lock:
            store, self._store = self._store, None
            if store is not None and callable(getattr(store, "close", None)):
                store.close()

    def _ready(self):
        if self._store is None:
            raise errors.Unavailable("%s: not configured or closed" % self._info.name)

    def _apply(self, r):
        self._recs[(r.realm, r.id)] = r
        if r.status == records.ACTIVE:
            self._ix.setdefault(r.realm, text.Index()).put((r.realm, r.id), [text.tag_text(r.tags), r.title, r.description, r.body])
        elif r.realm in self._ix:
            self._ix[r.realm].delete((r.realm, r.id))

    def _put(self, recs):
        self._store.put(recs)
        for r in recs:
            self._apply(r)

    def _find_content(self, realm, scope, hash_, now):
        for r in self._recs.values():
            if r.realm == realm and r.scope == scope and r.content_hash == hash_ and r.recallable(now):
                return r.id
        return ""

    def recall(self, q):
        now, qt = now_ms(), text.terms(q.query)
        want = {text.fold_tag(t) for t in q.tags}
        unwanted = {text.fold_tag(t) for t in q.exclude_tags}
        with self._held():
            self._ready()
            hits = []
            for (realm, rid), r in self._recs.items():
                if realm != q.realm or not r.recallable(now) or (q.scopes and r.scope not in q.scopes) or rid in q.exclude_ids:
                    continue
                tags = {text.fold_tag(t) for t in r.tags}
                if not want <= tags or unwanted & tags:
                    continue
                when = r.when_ms()
                if q.since_ms and when < q.since_ms or q.until_ms and when >= q.until_ms:
                    continue
                s = self._ix[realm].score((realm, rid), qt) if realm in self._ix else 0.0
                if s > 0:
                    hits.append((r, s))
        hits.sort(key=lambda h: (-h[1], -h[0].updated_ms, h[0].id))
        return [(r.copy(), s) for r, s in hits[:q.limit]]

    def remember(self, realm, recs):
        now = now_ms()
        for i, r in enumerate(recs):
            try:
                records.prepare(r, realm, now)
            except errors.FieldError as e:
                raise e.prefixed("records[%d]" % i)
        with self._held():
            self._ready()
            ids, fresh, batch = [], [], {}
            for i, r in enumerate(recs):
                key = (r.scope, r.content_hash)
                found = batch.get(key) or self._find_content(realm, r.scope, r.content_hash, now)
                if found:
                    ids.append(found)
                    continue
                if (realm, r.id) in self._recs or any(f.id == r.id for f in fresh):
                    raise errors.Conflict("record %d: id %r is taken by another record" % (i, r.id))
                batch[key] = r.id
                ids.append(r.id)
                fresh.append(r)
            if fresh:
                self._put(fresh)
            return ids

    def get(self, realm, ids):
        with self._held():
            self._ready()
            return [self._recs[(realm, i)].copy() for i in ids if (realm, i) in self._recs]

    def forget(self, realm, ids):
        with self._held():
            self._ready()
            gone = list(dict.fromkeys((realm, i) for i in ids if (realm, i) in self._recs))
            if gone:
                self._store.delete(gone)
                for k in gone:
                    del self._recs[k]
                    if realm in self._ix:
                        self._ix[realm].delete(k)
            return len(gone)

    def supersede(self, realm, old_id, rep):
        now = now_ms()
        with self._held():
            self._ready()
            old = self._recs.get((realm, old_id))
            if old is None:
                raise errors.NotFound("supersede %s: not found" % old_id)
            if old.status != records.ACTIVE:
                raise errors.Conflict("supersede %s: it is %s, not active" % (old_id, old.status))
            rep.scope, rep.kind = rep.scope or old.scope, rep.kind or old.kind
            rep.supersedes, rep.status = old_id, records.ACTIVE
            try:
                records.prepare(rep, realm, now)
            except errors.FieldError as e:
                raise e.prefixed("replacement")
            if (realm, rep.id) in self._recs:
                raise errors.Conflict("replacement id %r is taken" % rep.id)
            retired = old.copy()
            retired.status, retired.updated_ms = "superseded", now
            self._put([rep, retired])
            return rep.id

    def mark_used(self, realm, ids, at_ms):
        """One use of each listed record; an id listed twice counts once."""
        self.count_uses(realm, [(i, 1) for i in dict.fromkeys(ids)], at_ms)

    def count_uses(self, realm, uses, at_ms):
        """uses: (id, count) pairs, each id once."""
        with self._held():
            self._ready()
            used = []
            for i, n in uses:
                if (realm, i) in self._recs:
                    r = self._recs[(realm, i)].copy()
                    r.use_count = min(r.use_count + n, records.MAX_RECORD_USE_COUNT)
                    r.last_used_ms = max(r.last_used_ms, at_ms)
                    used.append(r)
            if used:
                self._put(used)

    def write_ledger(self, entries):
        with self._held():
            self._ready()
            if entries:
                self._store.append_ledger(entries)

    def manifest(self, q):
        if q.tier == "working_set" and q.k <= 0:
            raise errors.invalid("k", "is %d, a working set needs a positive k" % q.k)
        now = now_ms()
        with self._held():
            self._ready()
            rows = [(r, ManifestRow(r.id, r.scope, r.kind, r.title, r.description, r.updated_ms,
                                    _usage_rank(r, now) if r.use_count else 0.0))
                    for (realm, _), r in self._recs.items()
                    if realm == q.realm and r.recallable(now) and (not q.scopes or r.scope in q.scopes)]
        newest = sorted((row for _, row in rows), key=lambda row: (-row.updated_ms, row.id))
        if q.tier == "full":
            return newest
        used = sorted((row for r, row in rows if r.use_count), key=lambda row: (-row.rank, -row.updated_ms, row.id))[:q.k]
        unused = [row for r, row in rows if not r.use_count]
        unused.sort(key=lambda row: (-row.updated_ms, row.id))
        return used + unused[:max(0, 2 * q.k - len(used))]

    def export(self, realm, after, limit):
        with self._held():
            self._ready()
            ids = sorted(i for (rl, i) in self._recs if rl == realm and i > after)
            page = [self._recs[(realm, i)].copy() for i in ids[:limit]]
        return page, (ids[limit - 1] if len(ids) > limit else "")

    def import_records(self, realm, recs):
        now = now_ms()
        with self._held():
            self._ready()
            fresh, seen, batch, skipped = [], set(), set(), 0
            for r in recs:
                key, live = (r.scope, r.content_hash), r.recallable(now)
                held = self._recs.get((realm, r.id))
                if held is not None and r.id not in seen and records.import_retires(held, r):
                    # A newer export of the record: it was retired since
                    # (superseded, tombstoned), and leaves recall here too.
                    moved = held.copy()
                    moved.status, moved.updated_ms = r.status, max(held.updated_ms, r.updated_ms)
                    seen.add(r.id)
                    fresh.append(moved)
                    continue
                if r.id in seen or (realm, r.id) in self._recs or (live and (key in batch or self._find_content(realm, r.scope, r.content_hash, now))):
                    skipped += 1
                    continue
                seen.add(r.id)
                if live:
                    batch.add(key)
                fresh.append(r)
            if fresh:
                self._put(fresh)
            return len(fresh), skipped


def _usage_rank(r, now):
    """The Go providers' usage rank: uses decay by half every 30 days."""
    key = r.last_used_ms / HALF_LIFE_MS + math.log2(r.use_count)
    return max(2.0 ** (key - now / HALF_LIFE_MS), 5e-324)


__all__ = ["KVProvider", "Record", "decode_config"]
