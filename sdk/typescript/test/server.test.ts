// The plugin process as the host sees it: handshake, mutual TLS, the
// go-plugin services, validation and error statuses, logging, shutdown
// (the Python SDK's test_server.py, the same cases).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { KVProvider } from "../src/kv.js";
import { checkPlugin } from "../src/server.js";
import type { Plugin } from "../src/server.js";
import { serverCertificate } from "../src/tls.js";
import { MEMPLUGIN, channelOptions, clients, details, exited, failure, shutdown, start, stop, stream, unary } from "./harness.js";
import type { Started, Wire } from "./harness.js";

describe("a plugin process with the host's certificate", () => {
  let s: Started;
  let c: ReturnType<typeof clients>;
  const client = serverCertificate(); // a P-256 CA certificate for localhost, as the host makes

  before(async () => {
    s = await start(MEMPLUGIN, { PLUGIN_CLIENT_CERT: client.certPem, PLUGIN_PROTOCOL_VERSIONS: "1", MEMHOST_LOG_LEVEL: "debug" });
    const serverPem = new X509Certificate(Buffer.from(s.line[5]!, "base64")).toString();
    c = clients(s.line[3]!, grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(client.keyPem), Buffer.from(client.certPem)));
    await unary(c.plugin, "Configure", { config_json: Buffer.from("{}") });
  });
  after(() => {
    c?.close();
    stop(s);
  });

  test("prints the go-plugin handshake line", () => {
    assert.deepEqual(s.line.slice(0, 3), ["1", "1", "unix"]);
    assert.equal(s.line[4], "grpc");
    assert.ok(s.line[3]!.startsWith(join(s.sockets, "plugin")), s.line[3]);
    assert.ok(!s.line[5]!.includes("="), "the certificate is base64 without padding");
  });

  test("refuses a client without the host's certificate", async () => {
    const other = serverCertificate();
    const serverPem = new X509Certificate(Buffer.from(s.line[5]!, "base64")).toString();
    const stranger = clients(s.line[3]!, grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(other.keyPem), Buffer.from(other.certPem)));
    try {
      assert.equal((await failure(unary(stranger.plugin, "Info", {}))).code, grpc.status.UNAVAILABLE);
    } finally {
      stranger.close();
    }
  });

  test("answers Info", async () => {
    const info = await unary(c.plugin, "Info", {});
    assert.deepEqual([info.name, info.version, info.kinds, info.protocol_versions], ["memtest", "1.2.3", ["provider"], [1]]);
    assert.ok(info.capabilities.includes("write"));
    assert.ok(!info.capabilities.includes("ledger"));
  });

  test("answers the health check", async () => {
    const health = new grpc.Client("unix:" + s.line[3], grpc.credentials.createSsl(
      Buffer.from(new X509Certificate(Buffer.from(s.line[5]!, "base64")).toString()), Buffer.from(client.keyPem), Buffer.from(client.certPem)),
    channelOptions);
    const res = await new Promise<Buffer>((resolve, reject) =>
      health.makeUnaryRequest("/grpc.health.v1.Health/Check", (b: Buffer) => b, (b: Buffer) => b, Buffer.from("\n\x06plugin"),
        (err, r) => (err ? reject(err) : resolve(r!))));
    health.close();
    assert.deepEqual([...res], [0x08, 0x01]);
  });

  test("refuses bad requests with the field and code sdk.Serve answers", async (t) => {
    const big = { scope: "realm", kind: "fact", title: "t", body: "x".repeat(64 * 1024 + 1) };
    const cases: [string, Wire, grpc.status, string][] = [
      ["Recall", { realm: "../x" }, grpc.status.INVALID_ARGUMENT, "realm"],
      ["Recall", { realm: "a", scopes: ["realm", "team:x"] }, grpc.status.INVALID_ARGUMENT, "scopes[1]"],
      ["Recall", { realm: "a", limit: -1 }, grpc.status.INVALID_ARGUMENT, "limit"],
      ["Recall", { realm: "a", tags: ["a,b"] }, grpc.status.INVALID_ARGUMENT, "tags[0]"],
      ["Recall", { realm: "a", since_unix_ms: 5, until_unix_ms: 5 }, grpc.status.INVALID_ARGUMENT, "until"],
      ["Remember", { realm: "a", records: [{ scope: "realm", kind: "fact", title: "t", occurred_unix_ms: 253402300800000 }] },
        grpc.status.INVALID_ARGUMENT, "records[0].occurred_at"],
      ["Remember", { realm: "a", records: [big] }, grpc.status.OUT_OF_RANGE, "records[0].body"],
      ["Get", { realm: "a", ids: Array(1001).fill("x") }, grpc.status.OUT_OF_RANGE, "ids"],
      ["Supersede", { realm: "a", old_id: "x", replacement: { title: "t", tags: [" "] } }, grpc.status.INVALID_ARGUMENT, "replacement.tags[0]"],
      ["Manifest", { realm: "a", tier: 0 }, grpc.status.INVALID_ARGUMENT, "tier"],
      ["WriteLedger", {}, grpc.status.UNIMPLEMENTED, ""],
      ["Reindex", {}, grpc.status.UNIMPLEMENTED, ""],
    ];
    for (const [method, req, code, field] of cases) {
      await t.test(`${method} ${field}`, async () => {
        const call = method === "Manifest" || method === "Reindex" ? stream(c.provider, method, req) : unary(c.provider, method, req);
        const e = await failure(call);
        assert.equal(e.code, code, e.message);
        if (field) {
          assert.ok(details(e).includes("google.rpc.BadRequest"));
          assert.ok(details(e).includes(field), details(e));
        }
      });
    }
  });

  test("answers the stored id for a duplicate, and a manifest as one message when empty", async () => {
    const rec = { scope: "realm", kind: "fact", title: "same", body: "b" };
    const ok = await unary(c.provider, "Remember", { realm: "dup", records: [rec] });
    const again = await unary(c.provider, "Remember", { realm: "dup", records: [rec, rec] });
    assert.deepEqual(again.ids, [...ok.ids, ...ok.ids]);
    assert.equal((await stream(c.provider, "Manifest", { realm: "empty", tier: "MANIFEST_TIER_FULL" })).length, 1);
  });
});

describe("a plugin process's lifecycle", () => {
  test("a storage-full batch stores nothing and answers RESOURCE_EXHAUSTED with STORAGE_FULL", async () => {
    const s = await start(MEMPLUGIN);
    const c = clients(s.line[3]!);
    try {
      await unary(c.plugin, "Configure", { config_json: Buffer.from('{"fail_title":"boom"}') });
      const recs = [{ scope: "realm", kind: "fact", title: "fine", body: "kept only with its batch" },
        { scope: "realm", kind: "fact", title: "boom", body: "b" }];
      const e = await failure(unary(c.provider, "Remember", { realm: "a", records: recs }));
      assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.ok(details(e).includes("STORAGE_FULL"));
      assert.equal((await unary(c.provider, "Recall", { realm: "a", query: "batch" })).hits.length, 0, "a refused batch stored a record");
    } finally {
      c.close();
      stop(s);
    }
  });

  test("what the plugin prints reaches stderr, which the host logs, not stdout, which it reads no more", async () => {
    const s = await start(MEMPLUGIN);
    const c = clients(s.line[3]!);
    try {
      await unary(c.plugin, "Configure", { config_json: Buffer.from('{"print":true}') });
      for (let i = 0; i < 50 && !s.stderr.includes("printed at configure"); i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(s.stderr.includes("printed at configure"), `stderr: ${s.stderr.join("\n")}`);
    } finally {
      c.close();
      stop(s);
    }
  });

  test("without the cookie it refuses to run", () => {
    const env = { ...process.env };
    delete env.MEMHOST_PLUGIN_COOKIE;
    const r = spawnSync(process.execPath, [MEMPLUGIN], { env, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /not run by hand/);
  });

  test("another protocol is refused", async () => {
    const s = await start(MEMPLUGIN, { PLUGIN_PROTOCOL_VERSIONS: "2,3" });
    try {
      assert.equal(await exited(s), 1);
      assert.match(s.stderr.join("\n"), /speaks protocols 2,3/);
    } finally {
      stop(s);
    }
  });

  test("config errors name the key", async () => {
    const s = await start(MEMPLUGIN);
    const c = clients(s.line[3]!);
    try {
      for (const [config, field] of [['{"nope":1}', "nope"], ['{"fail_title":3}', "fail_title"], ["[]", "config"], ["{", "config"]]) {
        const e = await failure(unary(c.plugin, "Configure", { config_json: Buffer.from(config!) }));
        assert.equal(e.code, grpc.status.INVALID_ARGUMENT, config);
        assert.ok(details(e).includes(field!), `${config}: ${details(e)}`);
      }
    } finally {
      c.close();
      stop(s);
    }
  });

  test("logs hclog JSON with the request id, and exits 0 on shutdown, its socket removed", async () => {
    const s = await start(MEMPLUGIN, { MEMHOST_LOG_LEVEL: "info" });
    assert.equal(s.line[5], "", "no client certificate, no server certificate");
    const c = clients(s.line[3]!);
    const rid = new grpc.Metadata();
    rid.set("memhost-request-id", "req-42");
    await unary(c.plugin, "Configure", { config_json: Buffer.from('{"fail_title":"x"}') }, rid);
    const e = await failure(unary(c.plugin, "Configure", { config_json: Buffer.from("{}") }));
    assert.equal(e.code, grpc.status.ALREADY_EXISTS);
    assert.equal(await shutdown(s), 0);
    c.close();
    assert.ok(!existsSync(s.line[3]!), "the socket outlived the plugin");
    const lines = s.stderr.map((l) => JSON.parse(l));
    const configured = lines.filter((l) => l["@message"] === "configured");
    assert.equal(configured.length, 1, JSON.stringify(lines));
    assert.deepEqual([configured[0]["@level"], configured[0].fail_title, configured[0].request_id], ["info", "x", "req-42"]);
    assert.match(configured[0]["@timestamp"], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    stop(s);
  });

  test("exits when the host it was started by is gone before it looked at its parent", async () => {
    // A pid no process holds: a child run and reaped. The plugin's parent
    // (this test) lives on, so only the host's pid tells it the host died.
    const gone = spawnSync("true").pid!;
    const s = await start(MEMPLUGIN, { MEMHOST_HOST_PID: String(gone) });
    try {
      const still = new Promise<string>((resolve) => setTimeout(() => resolve("still running"), 15_000).unref());
      assert.equal(await Promise.race([exited(s), still]), 0);
      assert.ok(s.stderr.some((l) => l.includes("host process is gone")), s.stderr.join("\n"));
    } finally {
      stop(s);
    }
  });
});

describe("checkPlugin", () => {
  const base = (): Plugin => ({ info: () => ({ name: "ok", version: "1.0.0" }), configure() {}, recall: () => [] });
  const cases: [string, Plugin, RegExp][] = [
    ["a bad name", { ...base(), info: () => ({ name: "a/b", version: "1.0.0" }) }, /name .* may hold only/],
    ["a bad version", { ...base(), info: () => ({ name: "ok", version: "v1" }) }, /not a semantic version/],
    ["an unknown kind", { ...base(), info: () => ({ name: "ok", version: "1.0.0", kinds: ["selector"] }) }, /does not serve/],
    ["a kind without its method", { info: () => ({ name: "ok", version: "1.0.0" }), configure() {} }, /no recall method/],
    ["a capability without its method", { ...base(), info: () => ({ name: "ok", version: "1.0.0", capabilities: ["archive"] }) }, /no export method/],
    ["an unknown capability", { ...base(), info: () => ({ name: "ok", version: "1.0.0", capabilities: ["teleport"] }) }, /unknown capability/],
  ];
  for (const [name, p, want] of cases) test(`refuses ${name}`, () => assert.throws(() => checkPlugin(p), want));
  test("accepts KVProvider with a ledger", () => checkPlugin(new KVProvider({ name: "kv", version: "0.1.0", open: () => ({ load: () => [], put() {}, delete() {} }), ledger: true })));
});
