// The example provider's own file handling (the Go conformance kit and
// cmd/memhost's TestTypeScriptProviderServe test the rest).
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { prepare, newRecord } from "../src/records.js";
import { EXAMPLE, clients, details, failure, shutdown, start, stop, unary } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "jsonl-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function withExample<T>(path: string, fn: (c: ReturnType<typeof clients>) => Promise<T>): Promise<T> {
  const s = await start(EXAMPLE);
  const c = clients(s.line[3]!);
  try {
    await unary(c.plugin, "Configure", { config_json: Buffer.from(JSON.stringify({ path })) });
    const out = await fn(c);
    assert.equal(await shutdown(s), 0);
    return out;
  } finally {
    c.close();
    stop(s);
  }
}

const titles = async (c: ReturnType<typeof clients>, query: string) =>
  (await unary(c.provider, "Recall", { realm: "acme", query })).hits.map((h: { record: { title: string } }) => h.record.title).sort();

test("a line cut short by a crash is dropped, and writes after it survive a restart", async () => {
  const path = join(dir, "torn.jsonl");
  const kept = newRecord({ scope: "realm", kind: "fact", title: "Kept note", body: "written whole" });
  prepare(kept, "acme", Date.now());
  writeFileSync(path, JSON.stringify({ put: [kept] }) + "\n");
  appendFileSync(path, '{"put":[{"id":"r0","realm":"acme","title":"Torn note"'); // the crash's half line
  await withExample(path, async (c) => {
    assert.deepEqual(await titles(c, "note"), ["Kept note"]);
    await unary(c.provider, "Remember", { realm: "acme", records: [{ scope: "realm", kind: "fact", title: "Later note", body: "b" }] });
  });
  assert.ok(readFileSync(path, "utf8").endsWith("}\n") && !readFileSync(path, "utf8").includes("Torn"));
  await withExample(path, async (c) => assert.deepEqual(await titles(c, "note"), ["Kept note", "Later note"]));
});

test("a damaged whole line refuses the store, naming the file and line", async () => {
  const path = join(dir, "damaged.jsonl");
  writeFileSync(path, "{}\nnot json\n{}\n");
  const s = await start(EXAMPLE);
  const c = clients(s.line[3]!);
  try {
    const e = await failure(unary(c.plugin, "Configure", { config_json: Buffer.from(JSON.stringify({ path })) }));
    assert.match(e.details, new RegExp(`${path}:2: `));
    assert.equal(details(e), "");
  } finally {
    c.close();
    stop(s);
  }
});
