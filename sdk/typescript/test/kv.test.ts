// KVProvider in process: recall's since/until window and records a Store
// loads from before a field existed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventEmitter } from "node:events";

import * as grpc from "@grpc/grpc-js";

import { callDeadline } from "../src/calls.js";
import { KVProvider, decodeConfig } from "../src/kv.js";
import { newRecord } from "../src/records.js";
import type { Record } from "../src/records.js";
import { run } from "../src/server.js";
import type { RecallQuery } from "../src/server.js";

async function provider(stored: Record[] = []): Promise<KVProvider> {
  const p = new KVProvider({ name: "kv", version: "0.1.0", open: () => ({ load: () => stored, put() {}, delete() {} }) });
  await p.configure({}, { version: "", protocols: [1], capabilities: [] });
  return p;
}

const query = (fields: Partial<RecallQuery>): RecallQuery => ({
  realm: "acme", query: "lunch", scopes: [], limit: 10, excludeIds: [], tags: [], excludeTags: [], sinceMs: 0, untilMs: 0,
  ...fields,
});

test("recall keeps the records whose occurredMs, else createdMs, lies in [sinceMs, untilMs), before its limit", async () => {
  const p = await provider();
  const jun = Date.UTC(2020, 5, 1);
  const sep = Date.UTC(2020, 8, 1);
  const note = (title: string, occurredMs: number) =>
    newRecord({ scope: "realm", kind: "fact", title, body: "lunch", occurredMs });
  // "lunch lunch" outscores the rest, so a limit applied before the window
  // would answer it and nothing else.
  const [junId, sepId, nowId, loudId] = await p.remember("acme", [
    note("june", jun), note("september", sep), note("stored now", 0),
    newRecord({ scope: "realm", kind: "fact", title: "lunch lunch", body: "lunch", occurredMs: Date.UTC(2019, 0, 1) }),
  ]);
  const ids = async (q: Partial<RecallQuery>) => (await p.recall(query(q))).map((h) => h.record.id).sort();
  const cases: [string, Partial<RecallQuery>, string[]][] = [
    ["no window", {}, [junId!, sepId!, nowId!, loudId!]],
    ["since June until September: since inclusive, until exclusive", { sinceMs: jun, untilMs: sep }, [junId!]],
    ["since one millisecond after June", { sinceMs: jun + 1, untilMs: sep + 1 }, [sepId!]],
    ["since 2021: createdMs when occurredMs is unset", { sinceMs: Date.UTC(2021, 0, 1) }, [nowId!]],
  ];
  for (const [name, q, want] of cases) assert.deepEqual(await ids(q), [...want].sort(), name);
  const top = await p.recall(query({ sinceMs: jun, limit: 1 }));
  assert.equal(top.length, 1, "the limit was applied before the window");
  assert.ok([junId, sepId, nowId].includes(top[0]!.record.id), top[0]!.record.title);
});

test("a record loaded without occurredMs (stored by an older SDK) reads 0 and is judged by createdMs", async () => {
  const old = newRecord({
    id: "r1", realm: "acme", scope: "realm", kind: "fact", title: "lunch", body: "b", trust: "operator", status: "active",
    createdMs: Date.UTC(2020, 0, 1), updatedMs: Date.UTC(2020, 0, 1),
  });
  delete (old as Partial<Record>).occurredMs;
  const p = await provider([old]);
  assert.equal((await p.get("acme", ["r1"]))[0]!.occurredMs, 0);
  assert.equal((await p.recall(query({ untilMs: Date.UTC(2020, 0, 1) }))).length, 0);
  assert.equal((await p.recall(query({ sinceMs: Date.UTC(2020, 0, 1) }))).length, 1);
});

// A call whose deadline passed while it waited for the provider's lock
// stores nothing: the host answered its caller 504 already, and the write
// used to land afterwards (from an outside review).
test("a write past its call's deadline stores nothing", async () => {
  let puts = 0;
  const p = new KVProvider({ name: "kv", version: "0.1.0", open: () => ({ load: () => [], put() { puts++; }, delete() {} }) });
  await p.configure({}, { version: "", protocols: [1], capabilities: [] });
  const rec = newRecord({ scope: "realm", kind: "fact", title: "late", body: "late" });
  await assert.rejects(callDeadline.run(Date.now() - 1, () => p.remember("acme", [rec])), (e: Error) => e.name === "DeadlineExceeded");
  assert.equal(puts, 0);
  await callDeadline.run(Date.now() + 60_000, () => p.remember("acme", [rec]));
  assert.equal(puts, 1);
});

// sdk.ContextErr, which kvprovider checks once it holds its lock, sees a
// cancelled call as well as a passed deadline: the host gave up on the
// write (its client went away), so storing it later changes the store
// behind everyone's back. checkDeadline saw the deadline only.
test("a write the host cancelled while it waited for the lock stores nothing", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const titles: string[] = [];
  const p = new KVProvider({
    name: "kv", version: "0.1.0",
    open: () => ({
      load: () => [],
      async put(recs: Record[]) {
        if (recs[0]!.title === "first") await held;
        titles.push(...recs.map((r) => r.title));
      },
      delete() {},
    }),
  });
  await p.configure({}, { version: "", protocols: [1], capabilities: [] });
  // A server call without a deadline, as run() sees it.
  const call = () => Object.assign(new EventEmitter(), { metadata: new grpc.Metadata(), cancelled: false, getDeadline: () => Infinity });
  const rec = (title: string) => newRecord({ scope: "realm", kind: "fact", title, body: title });
  const first = run(call(), () => p.remember("acme", [rec("first")]));
  const cancelled = call();
  const second = run(cancelled, () => p.remember("acme", [rec("second")]));
  cancelled.cancelled = true;
  cancelled.emit("cancelled");
  release();
  await first;
  await assert.rejects(second, (e: Error) => e.name === "Cancelled");
  assert.deepEqual(titles, ["first"]);
});

test("decodeConfig refuses a number that is not finite", () => {
  assert.deepEqual(decodeConfig({ limit: 4 }, { limit: 3 }), { limit: 4 });
  // A default of 0 or 1 may be a fraction's: JavaScript has one number type.
  assert.deepEqual(decodeConfig({ min_score: 0.25 }, { min_score: 0 }), { min_score: 0.25 });
  assert.throws(() => decodeConfig({ min_score: Infinity }, { min_score: 0.5 }), /finite/);
});

// Queued calls over a synchronous Store each start on a turn of the event
// loop of their own: chained as microtasks, a whole queue ran before the
// loop read the socket again, and the host's health check, unanswered,
// killed a plugin that was merely busy (from an outside review).
test("queued calls leave the event loop turns between them", async () => {
  let puts = 0;
  const busy = () => {
    const until = Date.now() + 20;
    while (Date.now() < until) { /* a synchronous Store's work */ }
    puts++;
  };
  const p = new KVProvider({ name: "kv", version: "0.1.0", open: () => ({ load: () => [], put: busy, delete() {} }) });
  await p.configure({}, { version: "", protocols: [1], capabilities: [] });
  const calls = Array.from({ length: 20 }, (_, i) =>
    p.remember("acme", [newRecord({ scope: "realm", kind: "fact", title: `t${i}`, body: "b" })]));
  const seen = await new Promise<number>((resolve) => setTimeout(() => resolve(puts), 0));
  await Promise.all(calls);
  assert.ok(seen < 20, `a timer ran only after ${seen} of 20 queued writes`);
  assert.equal(puts, 20);
});
