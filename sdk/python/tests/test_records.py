import unittest

from memhost_plugin import errors, records
from memhost_plugin.records import Record


def rec(**kw):
    base = dict(scope="identity:alice", kind="fact", title="A title", body="A body")
    base.update(kw)
    return Record(**base)


class ValidateRecordTest(unittest.TestCase):
    """The Go SDK's Record.Validate field paths and classes, case by case."""

    def test_refusals(self):
        cases = [
            ("an id escaping a directory", rec(id="../../etc/passwd"), "id", "invalid_argument"),
            ("an id starting with '.'", rec(id=".hidden"), "id", "invalid_argument"),
            ("an id of 129 bytes", rec(id="a" * 129), "id", "invalid_argument"),
            ("an unknown kind", rec(kind="opinion"), "kind", "invalid_argument"),
            ("no scope", rec(scope=""), "scope", "invalid_argument"),
            ("an unknown scope class", rec(scope="team:x"), "scope", "invalid_argument"),
            ("a scope name escaping", rec(scope="identity:../x"), "scope", "invalid_argument"),
            ("blank title and body", rec(title=" ", body="\n"), "title", "invalid_argument"),
            ("a NUL byte", rec(body="a\0b"), "body", "invalid_argument"),
            ("a title over 200 bytes", rec(title="é" * 101), "title", "too_large"),
            ("a body over 64 KiB", rec(body="x" * (64 * 1024 + 1)), "body", "too_large"),
            ("33 tags", rec(tags=["t%d" % i for i in range(33)]), "tags", "too_large"),
            ("a tag with a comma", rec(tags=["ok", "a,b"]), "tags[1]", "invalid_argument"),
            ("a blank tag", rec(tags=["  "]), "tags[0]", "invalid_argument"),
            ("an unknown trust", rec(trust="root"), "trust", "invalid_argument"),
            ("an unknown status", rec(status="deleted"), "status", "invalid_argument"),
            ("a bad supersedes", rec(supersedes="../x"), "supersedes", "invalid_argument"),
            ("a blank thread id", rec(thread=(" ", 0)), "thread.id", "invalid_argument"),
            ("a negative seq", rec(thread=("t", -1)), "thread.seq", "invalid_argument"),
        ]
        for name, r, field, code in cases:
            with self.subTest(name):
                with self.assertRaises(errors.FieldError) as cm:
                    records.validate_record(r)
                self.assertEqual(cm.exception.field, field)
                self.assertEqual(cm.exception.code, code)

    def test_limits_are_inclusive(self):
        records.validate_record(rec(title="x" * 200, description="d" * 400, body="b" * (64 << 10),
                                    tags=["t%d" % i for i in range(32)], id="a" * 128))

    def test_batch_paths(self):
        with self.assertRaises(errors.FieldError) as cm:
            records.check_records("acme", [rec(), rec(kind="nope")], records.validate_record)
        self.assertEqual(cm.exception.field, "records[1].kind")
        with self.assertRaises(errors.FieldError) as cm:
            records.check_records("acme", [rec()] * 1001, records.validate_record)
        self.assertEqual((cm.exception.field, cm.exception.code), ("records", "too_large"))
        with self.assertRaises(errors.FieldError) as cm:
            records.check_ids("ids", ["ok", "a/b"])
        self.assertEqual(cm.exception.field, "ids[1]")

    def test_use_counts(self):
        records.check_uses("uses", [("a", 1), ("b", records.MAX_USE_COUNT)])
        for uses, field in [([("a", 1), ("a", 2)], "uses[1].id"), ([("a", 0)], "uses[0].count"),
                            ([("a", records.MAX_USE_COUNT + 1)], "uses[0].count"), ([("a/b", 1)], "uses[0].id")]:
            with self.assertRaises(errors.FieldError) as cm:
                records.check_uses("uses", uses)
            self.assertEqual((cm.exception.field, cm.exception.code), (field, "invalid_argument"))

    def test_prepare_fills_store_fields(self):
        r = rec()
        records.prepare(r, "acme", 1_700_000_000_000)
        self.assertEqual((r.realm, r.trust, r.status), ("acme", "agent_observed", "active"))
        self.assertRegex(r.id, r"^r18bcfe56800[0-9a-f]{16}$")
        self.assertEqual((r.created_ms, r.updated_ms), (1_700_000_000_000, 1_700_000_000_000))
        # sdk.ContentHash("A title", "A body"): sha256 of title, NUL, body.
        self.assertEqual(r.content_hash, "87e4f63d18241a48f96cd88e0732859e50066bfb8c5075c0fc9f86dfa82800ea")
        with self.assertRaises(errors.FieldError) as cm:
            records.prepare(rec(realm="other"), "acme", 1)
        self.assertEqual(cm.exception.field, "realm")


class StatusDetailsTest(unittest.TestCase):
    def test_bad_request_encoding(self):
        e = errors.invalid("records[2].title", "is not valid")
        (detail,) = e.details()
        self.assertIn(b"type.googleapis.com/google.rpc.BadRequest", detail)
        self.assertIn(b"records[2].title", detail)
        self.assertIn(b"is not valid", detail)

    def test_storage_full_info(self):
        (detail,) = errors.StorageFull("disk full").details()
        self.assertIn(b"google.rpc.ErrorInfo", detail)
        self.assertIn(b"STORAGE_FULL", detail)
        self.assertIn(b"memhost", detail)


if __name__ == "__main__":
    unittest.main()


class BlankAsTheHostTrimsTest(unittest.TestCase):
    # Go's strings.TrimSpace keeps U+001F and U+FEFF; str.strip trimmed
    # U+001F, so a record the host accepts was refused here (from an
    # outside review).
    def test_blank(self):
        from memhost_plugin.records import blank
        for s in ("", " ", "\t\n\u00a0\u3000\u2028"):
            self.assertTrue(blank(s), repr(s))
        for s in ("\x1f", "\ufeff", "\u200b", "a"):
            self.assertFalse(blank(s), repr(s))


class PackageExportsTest(unittest.TestCase):
    """A provider written without KVProvider fills a new record's id, times
    and hash with prepare, from the package itself (it lived only in a
    submodule no document named)."""

    def test_prepare_from_the_package(self):
        import memhost_plugin
        r = rec()
        memhost_plugin.prepare(r, "default", memhost_plugin.now_ms())
        self.assertTrue(r.id and r.created_ms and r.updated_ms and r.content_hash)
        self.assertEqual((r.realm, r.status, r.trust), ("default", "active", "agent_observed"))
        memhost_plugin.validate_record(r)
        memhost_plugin.prepare_import(r, "default")
        self.assertTrue(memhost_plugin.new_record_id())


class ClassifyTest(unittest.TestCase):
    """A full or read-only disk a plugin did not classify itself reaches the
    host as storage_full or read_only, not as an internal error."""

    def test_system_errors(self):
        import errno as e

        for number, code in ((e.ENOSPC, "storage_full"), (e.EDQUOT, "storage_full"), (e.EFBIG, "storage_full"), (e.EROFS, "read_only"), (e.EACCES, None)):
            err = OSError(number, "write failed", "/data/x")
            got = errors.classify(err)
            if code is None:
                self.assertIs(got, err)
            else:
                self.assertEqual(got.code, code)
                self.assertIn("write failed", str(got))
        unavailable = errors.Unavailable("closed")
        self.assertIs(errors.classify(unavailable), unavailable)

    def test_wrapped_system_errors(self):
        """An error raised from a full or read-only disk's (raise ... from
        e, as Go's %w) is classified as that disk's, with its own message."""
        import errno as e

        for number, code in ((e.ENOSPC, "storage_full"), (e.EROFS, "read_only")):
            try:
                try:
                    raise OSError(number, "write failed", "/data/x")
                except OSError as cause:
                    raise RuntimeError("put vectors: %s" % cause) from cause
            except RuntimeError as err:
                got = errors.classify(err)
            self.assertIsInstance(got, errors.MemhostError)
            self.assertEqual(got.code, code)
            self.assertIn("put vectors", str(got))
        try:
            try:
                raise OSError(e.ENOSPC, "write failed")
            except OSError:
                raise RuntimeError("a bug while handling it")
        except RuntimeError as err:
            self.assertIs(errors.classify(err), err, "an error only raised while handling one is not its")
