// The Go SDK's Record.Validate field paths and classes, case by case (the
// Python SDK's test_records.py, the same table).
import assert from "node:assert/strict";
import { test } from "node:test";

import { FieldError, MemhostError, StorageFull, classify, invalid } from "../src/errors.js";
import * as records from "../src/records.js";
import type { Record } from "../src/records.js";

const rec = (fields: Partial<Record> = {}) =>
  records.newRecord({ scope: "identity:alice", kind: "fact", title: "A title", body: "A body", ...fields });

function refusal(fn: () => void): FieldError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof FieldError, `threw ${String(e)}, want a FieldError`);
    return e;
  }
  assert.fail("no refusal");
}

test("validateRecord refuses each bad field under its path and code", async (t) => {
  const cases: [string, Record, string, string][] = [
    ["an id escaping a directory", rec({ id: "../../etc/passwd" }), "id", "invalid_argument"],
    ["an id starting with '.'", rec({ id: ".hidden" }), "id", "invalid_argument"],
    ["an id of 129 bytes", rec({ id: "a".repeat(129) }), "id", "invalid_argument"],
    ["an unknown kind", rec({ kind: "opinion" }), "kind", "invalid_argument"],
    ["no scope", rec({ scope: "" }), "scope", "invalid_argument"],
    ["an unknown scope class", rec({ scope: "team:x" }), "scope", "invalid_argument"],
    ["a scope name escaping", rec({ scope: "identity:../x" }), "scope", "invalid_argument"],
    ["blank title and body", rec({ title: " ", body: "\n" }), "title", "invalid_argument"],
    ["a NUL byte", rec({ body: "a\0b" }), "body", "invalid_argument"],
    ["a title over 200 bytes", rec({ title: "é".repeat(101) }), "title", "too_large"],
    ["a body over 64 KiB", rec({ body: "x".repeat(64 * 1024 + 1) }), "body", "too_large"],
    ["33 tags", rec({ tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }), "tags", "too_large"],
    ["a tag with a comma", rec({ tags: ["ok", "a,b"] }), "tags[1]", "invalid_argument"],
    ["a blank tag", rec({ tags: ["  "] }), "tags[0]", "invalid_argument"],
    ["an unknown trust", rec({ trust: "root" }), "trust", "invalid_argument"],
    ["an unknown status", rec({ status: "deleted" }), "status", "invalid_argument"],
    ["a bad supersedes", rec({ supersedes: "../x" }), "supersedes", "invalid_argument"],
    ["a blank thread id", rec({ thread: { id: " ", seq: 0 } }), "thread.id", "invalid_argument"],
    ["a negative seq", rec({ thread: { id: "t", seq: -1 } }), "thread.seq", "invalid_argument"],
    ["a seq past 2^53-1", rec({ thread: { id: "t", seq: 2 ** 63 } }), "thread.seq", "invalid_argument"],
    ["an occurred_at in the year 10000", rec({ occurredMs: Date.UTC(10000, 0, 1) }), "occurred_at", "invalid_argument"],
    ["an occurred_at before the year 1", rec({ occurredMs: -62135596800001 }), "occurred_at", "invalid_argument"],
  ];
  for (const [name, r, field, code] of cases) {
    await t.test(name, () => {
      const e = refusal(() => records.validateRecord(r));
      assert.equal(e.field, field);
      assert.equal(e.code, code);
    });
  }
});

test("the limits are inclusive", () => {
  records.validateRecord(rec({
    title: "x".repeat(200), description: "d".repeat(400), body: "b".repeat(64 << 10),
    tags: Array.from({ length: 32 }, (_, i) => `t${i}`), id: "a".repeat(128),
  }));
  // The first and last millisecond of the years 1-9999 (the Go SDK's CheckTime).
  for (const occurredMs of [Date.UTC(10000, 0, 1) - 1, -62135596800000]) records.validateRecord(rec({ occurredMs }));
});

test("every kind the Go SDK knows is accepted, episode included", () => {
  for (const kind of ["preference", "fact", "gotcha", "procedure", "relationship", "open_loop", "reference", "episode"]) {
    records.validateRecord(rec({ kind }));
  }
});

test("checkWindow refuses a window that holds no instant, or an end outside the years 1-9999", () => {
  const jun = Date.UTC(2020, 5, 1);
  for (const [since, until] of [[0, 0], [jun, 0], [0, jun], [jun, jun + 1]]) records.checkWindow(since!, until!);
  const cases: [number, number, string][] = [
    [jun, jun, "until"], [jun, jun - 1, "until"], [Date.UTC(10000, 0, 1), 0, "since"], [0, -62135596800001, "until"],
  ];
  for (const [since, until, field] of cases) {
    const e = refusal(() => records.checkWindow(since, until));
    assert.deepEqual([e.field, e.code], [field, "invalid_argument"], `since ${since} until ${until}`);
  }
});

test("batch checks name the element", () => {
  assert.equal(refusal(() => records.checkRecords("acme", [rec(), rec({ kind: "nope" })], records.validateRecord)).field,
    "records[1].kind");
  const big = refusal(() => records.checkRecords("acme", Array.from({ length: 1001 }, () => rec()), records.validateRecord));
  assert.deepEqual([big.field, big.code], ["records", "too_large"]);
  assert.equal(refusal(() => records.checkIds("ids", ["ok", "a/b"])).field, "ids[1]");
  assert.equal(refusal(() => records.checkTagFilter("exclude_tags", ["a", "b\tc"])).field, "exclude_tags[1]");
});

test("use counts: each id once, counts 1 to MAX_USE_COUNT", () => {
  records.checkUses("uses", [{ id: "a", count: 1 }, { id: "b", count: records.MAX_USE_COUNT }]);
  for (const [uses, field] of [
    [[{ id: "a", count: 1 }, { id: "a", count: 2 }], "uses[1].id"],
    [[{ id: "a", count: 0 }], "uses[0].count"],
    [[{ id: "a", count: 1.5 }], "uses[0].count"],
    [[{ id: "a", count: records.MAX_USE_COUNT + 1 }], "uses[0].count"],
    [[{ id: "a/b", count: 1 }], "uses[0].id"],
  ] as [records.Use[], string][]) {
    const e = refusal(() => records.checkUses("uses", uses));
    assert.deepEqual([e.field, e.code], [field, "invalid_argument"]);
  }
});

test("prepare fills what the store owns, with the Go SDK's content hash", () => {
  const r = rec();
  records.prepare(r, "acme", 1_700_000_000_000);
  assert.deepEqual([r.realm, r.trust, r.status], ["acme", "agent_observed", "active"]);
  assert.match(r.id, /^r18bcfe56800[0-9a-f]{16}$/);
  assert.deepEqual([r.createdMs, r.updatedMs], [1_700_000_000_000, 1_700_000_000_000]);
  // sdk.ContentHash("A title", "A body"): sha256 of title, NUL, body.
  assert.equal(r.contentHash, "87e4f63d18241a48f96cd88e0732859e50066bfb8c5075c0fc9f86dfa82800ea");
  assert.equal(refusal(() => records.prepare(rec({ realm: "other" }), "acme", 1)).field, "realm");
});

test("prepareImport refuses a record missing what an export holds, or a wrong hash", () => {
  const full = () => rec({ id: "r1", status: "active", trust: "operator", createdMs: 1, updatedMs: 2 });
  records.prepareImport(full(), "acme");
  assert.equal(refusal(() => records.prepareImport({ ...full(), createdMs: 0 }, "acme")).field, "created_at");
  assert.equal(refusal(() => records.prepareImport({ ...full(), contentHash: "00" }, "acme")).field, "content_hash");
});

test("error details carry the field and the storage-full reason", () => {
  const [detail] = invalid("records[2].title", "is not valid").details();
  for (const want of ["type.googleapis.com/google.rpc.BadRequest", "records[2].title", "is not valid"]) {
    assert.ok(detail!.includes(want), want);
  }
  const [info] = new StorageFull("disk full").details();
  for (const want of ["google.rpc.ErrorInfo", "STORAGE_FULL", "memhost"]) assert.ok(info!.includes(want), want);
});

// Go's strings.TrimSpace keeps U+FEFF and U+001F; String.trim dropped
// U+FEFF, so a record the host accepts was refused here (from an outside
// review).
test("blank trims as the host does", () => {
  for (const s of ["", " ", "\t\n\u00a0\u3000\u2028"]) assert.ok(records.blank(s), JSON.stringify(s));
  for (const s of ["\u001f", "\ufeff", "\u200b", "a"]) assert.ok(!records.blank(s), JSON.stringify(s));
});

// A provider written without KVProvider fills a new record's id, times and
// hash with prepare, from the package itself (it was not exported).
test("prepare and its kin are exported from the package", async () => {
  const pkg = await import("../src/index.js");
  const r = rec();
  pkg.prepare(r, "default", pkg.nowMs());
  assert.ok(r.id && r.createdMs && r.updatedMs && r.contentHash);
  assert.deepEqual([r.realm, r.status, r.trust], ["default", "active", "agent_observed"]);
  pkg.validateRecord(r);
  pkg.prepareImport(r, "default");
  assert.ok(pkg.newRecordId());
});

test("a full or read-only disk the plugin did not classify reaches the host as its own code", () => {
  const sys = (code: string) => Object.assign(new Error(`${code}: write failed, '/data/x'`), { code });
  for (const [code, want] of [["ENOSPC", "storage_full"], ["EDQUOT", "storage_full"], ["EFBIG", "storage_full"], ["EROFS", "read_only"]] as const) {
    const got = classify(sys(code));
    assert.ok(got instanceof MemhostError, `${code} stayed ${String(got)}`);
    assert.equal(got.code, want);
    assert.match(got.message, /write failed/);
  }
  const other = sys("EACCES");
  assert.equal(classify(other), other);
  const full = new StorageFull("full");
  assert.equal(classify(full), full);
});

test("an error caused by a full or read-only disk is classified as that disk's, as Go's %w", () => {
  for (const [code, want] of [["ENOSPC", "storage_full"], ["EROFS", "read_only"]] as const) {
    const sys = Object.assign(new Error(`${code}: write failed, '/data/x'`), { code });
    const got = classify(new Error("put vectors failed", { cause: sys }));
    assert.ok(got instanceof MemhostError, `${code} stayed ${String(got)}`);
    assert.equal(got.code, want);
    assert.match(got.message, /put vectors failed/);
  }
});
