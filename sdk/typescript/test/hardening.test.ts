// What a careless plugin or a hostile host sends: the SDK refuses what the
// Go SDK refuses, and nothing a handler does takes the plugin down.
import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { FieldError } from "../src/errors.js";
import { Logger } from "../src/log.js";
import * as records from "../src/records.js";
import { clients, details, failure, start, stop, unary } from "./harness.js";
import type { Started } from "./harness.js";

const HOSTILE = fileURLToPath(new URL("./hostileplugin.js", import.meta.url));
const YEAR_10000_MS = 253402300800000;
const BEFORE_YEAR_1_MS = -62135596800001;

test("validateRecord holds every time a record carries to the years 1-9999, as sdk.Record.Validate does", () => {
  const fields = [["occurredMs", "occurred_at"], ["expiresMs", "expires_at"], ["createdMs", "created_at"],
    ["updatedMs", "updated_at"], ["lastUsedMs", "last_used_at"]] as const;
  for (const [key, field] of fields) {
    for (const ms of [YEAR_10000_MS, BEFORE_YEAR_1_MS]) {
      const r = records.newRecord({ scope: "realm", kind: "fact", title: "t", [key]: ms });
      assert.throws(() => records.validateRecord(r), (e) => e instanceof FieldError && e.field === field && e.code === "invalid_argument",
        `${key} ${ms}`);
    }
    records.validateRecord(records.newRecord({ scope: "realm", kind: "fact", title: "t", [key]: YEAR_10000_MS - 1 }));
  }
});

test("a large log line stays JSON at its level", () => {
  // The host cuts a line past 64 KiB, which is then no JSON and is logged
  // as text at info: the SDK's own "call failed" line with an error's
  // large text in it was.
  const dir = mkdtempSync(join(tmpdir(), "memhost-log-"));
  try {
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, "\0".repeat(5000)]));
    for (const fields of [{ error: "b".repeat(70000), stack: "s".repeat(70000) }, many]) {
      const path = join(dir, "line");
      const fd = openSync(path, "w");
      new Logger(fd, "info").error("m\u00e9".repeat(50000), fields);
      closeSync(fd);
      const out = readFileSync(path);
      assert.ok(out.length < 64 << 10, `${out.length} bytes`);
      const line = JSON.parse(out.toString()) as { [k: string]: unknown };
      assert.equal(line["@level"], "error");
      assert.match(line["@message"] as string, /^m\u00e9m\u00e9/);
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("a log field cannot take the line's own keys", () => {
  // A field named @level or @message replaced the line's own: the host
  // showed an info line as an error, with another message.
  const dir = mkdtempSync(join(tmpdir(), "memhost-log-"));
  try {
    const fields = { "@level": "error", "@message": "forged", "@timestamp": "2020-01-01T00:00:00.000000Z", "@module": "memhost" };
    const path = join(dir, "line");
    const fd = openSync(path, "w");
    new Logger(fd, "info").info("compacted", fields);
    closeSync(fd);
    const line = JSON.parse(readFileSync(path).toString()) as { [k: string]: unknown };
    assert.deepEqual([line["@level"], line["@message"]], ["info", "compacted"]);
    assert.notEqual(line["@timestamp"], fields["@timestamp"]);
    assert.ok(!("@module" in line));
    assert.deepEqual(Object.fromEntries(Object.keys(fields).map((k) => [k, line["plugin" + k]])), fields);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

describe("a plugin process that misbehaves", () => {
  let s: Started;
  let c: ReturnType<typeof clients>;

  before(async () => {
    s = await start(HOSTILE);
    c = clients(s.line[3]!);
  });
  after(() => {
    c?.close();
    stop(s);
  });

  test("refuses an expiry or an imported time past the year 9999", async () => {
    let e = await failure(unary(c.provider, "Remember", {
      realm: "a", records: [{ scope: "realm", kind: "fact", title: "t", expires_unix_ms: YEAR_10000_MS }],
    }));
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.ok(details(e).includes("records[0].expires_at"), details(e));
    e = await failure(unary(c.provider, "Import", {
      realm: "a", records: [{ id: "x", scope: "realm", kind: "fact", title: "t", status: "active", trust: "operator",
        created_unix_ms: 1, updated_unix_ms: 2, last_used_unix_ms: YEAR_10000_MS }],
    }));
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.ok(details(e).includes("records[0].last_used_at"), details(e));
  });

  test("refuses a ledger entry as sdk.LedgerEntry.Validate does", async (t) => {
    const entry = { realm: "a", identity: "alice", session: "s1", record_id: "r1", surface: "turn", bytes: 10, at_unix_ms: 1 };
    const cases: [object, string, grpc.status][] = [
      [{ surface: "" }, "entries[1].surface", grpc.status.INVALID_ARGUMENT],
      [{ surface: "  " }, "entries[1].surface", grpc.status.INVALID_ARGUMENT],
      [{ surface: "s".repeat(65) }, "entries[1].surface", grpc.status.OUT_OF_RANGE],
      [{ surface: "a\0b" }, "entries[1].surface", grpc.status.INVALID_ARGUMENT],
      [{ session: "s".repeat(257) }, "entries[1].session", grpc.status.OUT_OF_RANGE],
      [{ session: "a\0b" }, "entries[1].session", grpc.status.INVALID_ARGUMENT],
      [{ bytes: -1 }, "entries[1].bytes", grpc.status.INVALID_ARGUMENT],
      [{ identity: "../x" }, "entries[1].identity.id", grpc.status.INVALID_ARGUMENT],
      [{ record_id: "" }, "entries[1].record_id", grpc.status.INVALID_ARGUMENT],
    ];
    for (const [bad, field, code] of cases) {
      await t.test(`${field} ${JSON.stringify(bad)}`, async () => {
        const e = await failure(unary(c.provider, "WriteLedger", { entries: [entry, { ...entry, ...bad }] }));
        assert.equal(e.code, code, e.message);
        assert.ok(details(e).includes(field), details(e));
      });
    }
    await unary(c.provider, "WriteLedger", { entries: [{ ...entry, surface: "s".repeat(64), session: "s".repeat(256), bytes: 0 }] });
  });
});

// Each in a process of its own: before the fix, each killed its plugin.
describe("a handler's failure", () => {
  async function call(query: string): Promise<grpc.ServiceError> {
    const s = await start(HOSTILE);
    const c = clients(s.line[3]!);
    try {
      const e = await failure(unary(c.provider, "Recall", { realm: "a", query }));
      assert.equal(s.proc.exitCode, null, "the plugin exited");
      assert.deepEqual((await unary(c.provider, "Recall", { realm: "a", query: "ok" })).hits, []);
      return e;
    } finally {
      c.close();
      stop(s);
    }
  }

  test("a rejection its handler awaits late is that call's error, not the end of the plugin", async () => {
    const e = await call("race");
    assert.equal(e.code, grpc.status.UNKNOWN, e.message);
    assert.equal(e.details, "the plugin failed: first lookup failed");
  });

  test("an unexpected error answers its text, without its type name", async () => {
    const e = await call("typeerror");
    assert.equal(e.code, grpc.status.UNKNOWN, e.message);
    assert.match(e.details, /^the plugin failed: Cannot read properties of undefined/);
    assert.equal((await call("empty")).details, "the plugin failed; its log has the details");
  });

  test("a message that is not well-formed UTF-16 is still the message", async () => {
    const e = await call("surrogate");
    assert.equal(e.code, grpc.status.NOT_FOUND, e.message);
    assert.equal(e.details, "no record titled deploy \ufffd");
  });

  test("a thrown value that cannot be made a string is still an error status", async () => {
    const e = await call("odd");
    assert.equal(e.code, grpc.status.UNKNOWN, e.message);
  });
});
