"""Records, scopes and the input rules every memhost store applies.

A port of the Go SDK's record.go, scope.go and validate.go: the same
limits, the same field paths and the same problems, so a Python plugin
refuses exactly what a Go one refuses (docs/protocol.md, section 7).
"""

import dataclasses
import hashlib
import os
import time

from .errors import invalid, too_large

MAX_TITLE_BYTES = 200
MAX_DESCRIPTION_BYTES = 400
MAX_BODY_BYTES = 64 << 10
MAX_TAGS = 32
MAX_TAG_BYTES = 64
MAX_ID_BYTES = 128
MAX_THREAD_ID_BYTES = 128
MAX_BATCH = 1000
MAX_EXPORT_PAGE = 1000
# A record's use_count stops here (2^53 - 1, exact in every JSON reader);
# an import over it is refused.
MAX_RECORD_USE_COUNT = (1 << 53) - 1
DEFAULT_RECALL_LIMIT = 10

RECORD_KINDS = ("preference", "fact", "gotcha", "procedure", "relationship", "open_loop", "reference", "episode")
TRUST_LEVELS = ("untrusted", "agent_observed", "agent_verified", "application", "operator")
STATUSES = ("active", "superseded", "quarantined", "tombstoned")
ACTIVE = "active"


@dataclasses.dataclass
class Record:
    """One memory. Times are Unix milliseconds; expires_ms 0 never expires;
    thread is None or (thread_id, seq); occurred_ms is when the remembered
    thing happened, 0 when unknown."""

    id: str = ""
    realm: str = ""
    scope: str = ""
    kind: str = ""
    title: str = ""
    description: str = ""
    body: str = ""
    tags: list = dataclasses.field(default_factory=list)
    trust: str = ""
    status: str = ""
    supersedes: str = ""
    created_ms: int = 0
    updated_ms: int = 0
    expires_ms: int = 0
    content_hash: str = ""
    use_count: int = 0
    last_used_ms: int = 0
    thread: tuple = None
    occurred_ms: int = 0

    def recallable(self, now_ms):
        return self.status == ACTIVE and (self.expires_ms == 0 or now_ms < self.expires_ms)

    def when_ms(self):
        """The time recall's since/until judge: occurred_ms, else created_ms."""
        return self.occurred_ms or self.created_ms

    def copy(self):
        return dataclasses.replace(self, tags=list(self.tags))

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["thread"] = list(self.thread) if self.thread else None
        return d

    @classmethod
    def from_dict(cls, d):
        r = cls(**d)
        r.thread = tuple(r.thread) if r.thread else None
        return r



# GO_SPACE is what Go's unicode.IsSpace calls space, which the host's
# strings.TrimSpace trims: Python's str.strip also trims the file and
# group separators U+001C..U+001F, which the host keeps.
GO_SPACE = "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def blank(s):
    """Whether s is empty once trimmed as the host trims it."""
    return not s.strip(GO_SPACE)

def now_ms():
    return time.time_ns() // 1_000_000


def content_hash(title, body):
    """sha256 over title, a NUL and body: the identity of a record's content."""
    return hashlib.sha256(title.encode() + b"\0" + body.encode()).hexdigest()


def new_record_id(at_ms=None):
    """A fresh id: the creation time in milliseconds, then 64 random bits."""
    return "r%011x%s" % (now_ms() if at_ms is None else at_ms, os.urandom(8).hex())


def token_problem(s, limit):
    """Why s is not a safe token (1-limit bytes of ASCII letters, digits,
    '-', '_' and '.', not starting with '.'), or None."""
    if s == "":
        return "must not be empty"
    n = len(s.encode("utf-8", "surrogatepass"))
    if n > limit:
        return "is %d bytes, the limit is %d" % (n, limit)
    if s[0] == ".":
        return "%s must not start with '.'" % _quote(s)
    if not all(c.isascii() and (c.isalnum() or c in "-_.") for c in s):
        return "%s may hold only letters, digits, '-', '_' and '.'" % _quote(s)
    return None


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate_id(i, field="id"):
    p = token_problem(i, MAX_ID_BYTES)
    if p:
        raise invalid(field, p)


def validate_realm(realm):
    p = token_problem(realm, 64)
    if p:
        raise invalid("realm", p)


def validate_scope(scope, field="scope"):
    if scope == "realm":
        return
    cls, sep, name = scope.partition(":")
    if not sep:
        raise invalid(field, "%s is not identity:<id>, mob:<name>, operator:<name> or realm" % _quote(scope))
    if cls not in ("identity", "mob", "operator"):
        raise invalid(field, "unknown scope class %s in %s" % (_quote(cls), _quote(scope)))
    p = token_problem(name, MAX_ID_BYTES)
    if p:
        raise invalid(field, "name in %s %s" % (_quote(scope), p))


def _check_text(field, s, limit):
    n = len(s.encode("utf-8", "surrogatepass"))
    if n > limit:
        raise too_large(field, "is %d bytes, the limit is %d" % (n, limit))
    if "\0" in s:
        raise invalid(field, "contains a NUL byte")


def validate_record(r):
    """Checks every field against the record limits; the id, times and
    hash may be empty (prepare fills them)."""
    if r.id:
        validate_id(r.id)
    if r.realm:
        validate_realm(r.realm)
    validate_scope(r.scope)
    if r.kind not in RECORD_KINDS:
        raise invalid("kind", "unknown kind %s (want one of %s)" % (_quote(r.kind), ", ".join(RECORD_KINDS)))
    if r.trust and r.trust not in TRUST_LEVELS:
        raise invalid("trust", "unknown trust %s (want one of %s)" % (_quote(r.trust), ", ".join(TRUST_LEVELS)))
    if r.status and r.status not in STATUSES:
        raise invalid("status", "unknown status %s (want one of %s)" % (_quote(r.status), ", ".join(STATUSES)))
    _check_text("title", r.title, MAX_TITLE_BYTES)
    _check_text("description", r.description, MAX_DESCRIPTION_BYTES)
    _check_text("body", r.body, MAX_BODY_BYTES)
    if blank(r.title) and blank(r.body):
        raise invalid("title", "title and body are both empty")
    if len(r.tags) > MAX_TAGS:
        raise too_large("tags", "%d tags, the limit is %d" % (len(r.tags), MAX_TAGS))
    for i, t in enumerate(r.tags):
        _check_tag("tags[%d]" % i, t)
    if r.supersedes:
        p = token_problem(r.supersedes, MAX_ID_BYTES)
        if p:
            raise invalid("supersedes", "id: " + p)
    # Every time a record carries must be one every store and the RFC 3339
    # form can hold (the Go SDK's Record.Validate).
    for field, ms in (("occurred_at", r.occurred_ms), ("expires_at", r.expires_ms), ("created_at", r.created_ms),
                      ("updated_at", r.updated_ms), ("last_used_at", r.last_used_ms)):
        check_time(field, ms)
    if r.thread is not None:
        tid, seq = r.thread
        _check_text("thread.id", tid, MAX_THREAD_ID_BYTES)
        if blank(tid):
            raise invalid("thread.id", "is blank: a thread needs an id")
        if seq < 0:
            raise invalid("thread.seq", "is %d, want 0 or more" % seq)


# Unix milliseconds of 0001-01-01 and 10000-01-01 UTC: the years every store
# and the RFC 3339 form of a time can hold (the Go SDK's CheckTime).
_MIN_MS, _END_MS = -62135596800000, 253402300800000


def check_time(field, ms):
    """Refuses a time outside the years 1-9999; 0 (unset) passes."""
    if ms and not _MIN_MS <= ms < _END_MS:
        raise invalid(field, "%d ms is outside the years 1-9999" % ms)


def check_window(since_ms, until_ms):
    """Checks a recall's since/until (0 leaves an end open), as the Go SDK's
    ValidateWindow does."""
    check_time("since", since_ms)
    check_time("until", until_ms)
    if since_ms and until_ms and since_ms >= until_ms:
        raise invalid("until", "%d ms is not after since %d ms" % (until_ms, since_ms))


def _check_tag(field, t):
    _check_text(field, t, MAX_TAG_BYTES)
    if blank(t) or any(c in t for c in "\n\r\t,"):
        raise invalid(field, "tag %s must be non-blank and hold no comma, tab or line break" % _quote(t))


MAX_LEDGER_SURFACE_BYTES = 64
MAX_LEDGER_SESSION_BYTES = 256


def validate_ledger_entry(realm, identity, session, record_id, surface, nbytes):
    """The Go SDK's LedgerEntry.Validate: the identity and record id, a
    surface that is not blank, surface and session as plain text within
    their limits, bytes not negative."""
    validate_realm(realm)
    validate_id(identity, "identity.id")
    validate_id(record_id, "record_id")
    if blank(surface):
        raise invalid("surface", "is empty")
    _check_text("surface", surface, MAX_LEDGER_SURFACE_BYTES)
    _check_text("session", session, MAX_LEDGER_SESSION_BYTES)
    if nbytes < 0:
        raise invalid("bytes", "is %d, must not be negative" % nbytes)


def check_tag_filter(field, tags):
    """Checks a recall filter's tags by the rules of a record's tags, as the
    Go SDK's ValidateTagFilter does: every refusal is invalid (400)."""
    if len(tags) > MAX_BATCH:
        raise invalid(field, "%d tags, the limit is %d" % (len(tags), MAX_BATCH))
    for i, t in enumerate(tags):
        _check_tag("%s[%d]" % (field, i), t)


def prepare(r, realm, at_ms):
    """Validates a record about to be stored in realm and fills what the
    store owns: realm, id, default trust and status, times, content hash."""
    if not r.realm:
        r.realm = realm
    if r.realm != realm:
        raise invalid("realm", "record names realm %s inside a write to realm %s" % (_quote(r.realm), _quote(realm)))
    r.trust = r.trust or "agent_observed"
    r.status = r.status or ACTIVE
    validate_record(r)
    r.id = r.id or new_record_id(at_ms)
    r.created_ms = r.created_ms or at_ms
    r.updated_ms = at_ms
    r.content_hash = content_hash(r.title, r.body)


def prepare_import(r, realm):
    """Validates a full record about to be imported as it stands."""
    if not r.realm:
        r.realm = realm
    if r.realm != realm:
        raise invalid("realm", "record names realm %s inside an import to realm %s" % (_quote(r.realm), _quote(realm)))
    validate_record(r)
    for field, missing in (("id", not r.id), ("status", not r.status), ("trust", not r.trust),
                           ("created_at", not r.created_ms), ("updated_at", not r.updated_ms)):
        if missing:
            raise invalid(field, "is required on an imported record")
    if r.use_count < 0:
        raise invalid("use_count", "is negative")
    if r.use_count > MAX_RECORD_USE_COUNT:
        raise invalid("use_count", "%d is over the most a record may have been used, %d" % (r.use_count, MAX_RECORD_USE_COUNT))
    h = content_hash(r.title, r.body)
    if r.content_hash and r.content_hash != h:
        raise invalid("content_hash", "does not match the title and body")
    r.content_hash = h


# Request checks, in the order the Go SDK's server runs them.


def import_retires(stored, r):
    """Whether importing r moves the stored record of its id on to r's later
    status, in place of skipping it (Go's sdk.ImportRetires): the same
    content in the same scope, stored active and r superseded or tombstoned,
    or stored superseded and r tombstoned. Never back to an earlier status,
    and never a pending proposal (quarantined)."""
    if stored.id != r.id or stored.scope != r.scope or content_hash(stored.title, stored.body) != content_hash(r.title, r.body):
        return False
    if stored.status == ACTIVE:
        return r.status in ("superseded", "tombstoned")
    if stored.status == "superseded":
        return r.status == "tombstoned"
    return False


def check_ids(field, ids):
    if len(ids) > MAX_BATCH:
        raise too_large(field, "%d ids in one call, the limit is %d" % (len(ids), MAX_BATCH))
    for i, x in enumerate(ids):
        validate_id(x, "%s[%d]" % (field, i))


MAX_USE_COUNT = 1_000_000


def check_uses(field, uses):
    """A CountUses list: at most MAX_BATCH, each id valid and listed once, each count 1..MAX_USE_COUNT."""
    check_batch(field, uses)
    seen = {}
    for i, (uid, count) in enumerate(uses):
        at = "%s[%d]" % (field, i)
        validate_id(uid, at + ".id")
        if uid in seen:
            raise invalid(at + ".id", "%r is listed at %d too; list each id once with its count" % (uid, seen[uid]))
        seen[uid] = i
        if not 1 <= count <= MAX_USE_COUNT:
            raise invalid(at + ".count", "%d is outside 1..%d" % (count, MAX_USE_COUNT))


def check_scopes(scopes):
    for i, s in enumerate(scopes):
        validate_scope(s, "scopes[%d]" % i)


def check_batch(field, items):
    if len(items) > MAX_BATCH:
        raise too_large(field, "%d %s in one call, the limit is %d" % (len(items), field, MAX_BATCH))


def check_records(realm, records, check):
    validate_realm(realm)
    check_batch("records", records)
    for i, r in enumerate(records):
        try:
            check(r)
        except Exception as e:
            raise _prefix(e, "records[%d]" % i)


def _prefix(e, prefix):
    return e.prefixed(prefix) if hasattr(e, "prefixed") else e
