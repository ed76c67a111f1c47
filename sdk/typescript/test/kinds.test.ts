// The services of the other kinds and the streamed reindex, served in
// process by register() over a Unix socket.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { register } from "../src/server.js";
import type { Message, Plugin } from "../src/server.js";
import { channelOptions, details, failure, pb, stream, unary } from "./harness.js";
import type { Wire } from "./harness.js";

const seen: unknown[][] = [];
const plugin: Plugin = {
  info: () => ({
    name: "kinds", version: "0.0.1", kinds: ["provider", "operator_resolver", "mob_resolver", "compactor"], capabilities: ["reindex"],
  }),
  configure() {},
  recall: () => [],
  reindex(realm, progress) {
    if (realm === "broken") {
      progress(5, 10);
      throw new Error("the index is damaged");
    }
    for (let i = 1; i <= 1000; i++) progress(i, 1000);
    return realm === "" ? 1000 : 7;
  },
  resolveOperator: async (realm, identity) => `${realm}-${identity}-op`,
  resolveMobs: (realm, identity) => [`${identity}s`],
  compact(conversationId, evicted: Message[], carryOver, key, maxBytes) {
    seen.push([conversationId, evicted, carryOver, key, maxBytes]);
    return { role: "system", content: `${evicted.length} messages` };
  },
};

const dir = mkdtempSync(join(tmpdir(), "mhkinds-"));
const server = new grpc.Server();
let stop!: () => void;
const stopped = new Promise<void>((resolve) => (stop = resolve));
const clients: { [name: string]: Wire } = {};

before(async () => {
  register(server, plugin, stop, stopped);
  const address = "unix:" + join(dir, "sock");
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  for (const name of ["Provider", "OperatorResolver", "MobResolver", "Compactor"]) {
    clients[name] = new pb[name](address, grpc.credentials.createInsecure(), channelOptions);
  }
});
after(() => {
  for (const c of Object.values(clients)) c.close();
  stop();
  server.forceShutdown();
  rmSync(dir, { recursive: true, force: true });
});

test("reindex streams its progress, the last count among it, then done", async () => {
  const out = await stream(clients.Provider, "Reindex", { realm: "" });
  const progress = out.filter((m) => m.event === "progress").map((m) => m.progress);
  assert.ok(progress.length >= 1 && progress.length < 1000, `${progress.length} progress messages for 1000 reports`);
  assert.deepEqual(progress.at(-1), { done: 1000, total: 1000 });
  assert.deepEqual(out.at(-1), { done: { reindexed: 1000 }, event: "done" });
  assert.equal((await failure(stream(clients.Provider, "Reindex", { realm: "a/b" }))).code, grpc.status.INVALID_ARGUMENT);
});

test("a failed reindex sends its pending progress before the error", async () => {
  const out: Wire[] = [];
  const call = clients.Provider.Reindex({ realm: "broken" }, { deadline: Date.now() + 10_000 });
  call.on("data", (m: Wire) => out.push(m));
  const e = await new Promise<grpc.ServiceError>((resolve, reject) => {
    call.on("error", resolve);
    call.on("end", () => reject(new Error("the reindex succeeded")));
  });
  assert.notEqual(e.code, grpc.status.OK);
  assert.deepEqual(out, [{ progress: { done: 5, total: 10 }, event: "progress" }]);
});

test("resolvers answer, after their identity is validated", async () => {
  assert.equal((await unary(clients.OperatorResolver, "ResolveOperator", { realm: "acme", identity: "dana" })).operator, "acme-dana-op");
  assert.deepEqual((await unary(clients.MobResolver, "ResolveMobs", { realm: "acme", identity: "dana" })).mobs, ["danas"]);
  const e = await failure(unary(clients.MobResolver, "ResolveMobs", { realm: "acme", identity: "../x" }));
  assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
  assert.ok(details(e).includes("identity.id"));
});

test("compact validates the evicted messages and passes the carry-over", async () => {
  const req = { conversation_id: "c1", evicted: [{ role: "user", content: "hi" }], carry_over: { role: "system", content: "before" },
    idempotency_key: "k", max_bytes: 100 };
  assert.deepEqual((await unary(clients.Compactor, "Compact", req)).artifact, { role: "system", content: "1 messages" });
  assert.deepEqual(seen.at(-1), ["c1", [{ role: "user", content: "hi" }], { role: "system", content: "before" }, "k", 100]);
  const cases: [Wire, string][] = [
    [{ ...req, evicted: [] }, "evicted"],
    [{ ...req, max_bytes: -1 }, "max_bytes"],
    [{ ...req, evicted: [{ role: "user", content: "a" }, { role: " ", content: "b" }] }, "evicted[1].role"],
  ];
  for (const [bad, field] of cases) {
    const e = await failure(unary(clients.Compactor, "Compact", bad));
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT, field);
    assert.ok(details(e).includes(field), field);
  }
});
