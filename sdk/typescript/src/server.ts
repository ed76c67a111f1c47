// sdk.Serve for TypeScript: the go-plugin handshake, mutual TLS, the
// services every plugin serves, and the memhost services of the plugin's
// kinds, with the Go SDK's input validation and error mapping
// (docs/protocol.md describes each part). The messages come from
// sdk/proto's plugin.proto, loaded at run time: no code is generated.

import { mkdtempSync, rmSync, rmdirSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { randomInt } from "node:crypto";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import { DeadlineExceeded, MemhostError, Unsupported, classify, invalid, statusDetails, under } from "./errors.js";
import { callDeadline, callEnded } from "./calls.js";
import { logger, requestId } from "./log.js";
import * as records from "./records.js";
import type { Record, Use } from "./records.js";
import { serverCertificate } from "./tls.js";

export const PROTOCOL_VERSION = 1;
export const COOKIE_KEY = "MEMHOST_PLUGIN_COOKIE";
export const COOKIE_VALUE = "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7";
const MAX_MESSAGE_BYTES = 1000 * (64 * 1024 + 200 + 400 + 32 * 64 + 1024);
const CHUNK_ROWS = 500;
const SOCKET_DIR_PREFIX = "mhsock-";

export interface Info {
  name: string;
  version: string;
  /** Defaults to ["provider"]. */
  kinds?: string[];
  capabilities?: string[];
  /** A JSON Schema of the instance's config, shown by the host. */
  configSchema?: object | null;
}

export interface HostInfo {
  version: string;
  protocols: number[];
  capabilities: string[];
}

export interface RecallQuery {
  realm: string;
  query: string;
  scopes: string[];
  /** 1 to 1000: the SDK fills the default (10) for 0. */
  limit: number;
  excludeIds: string[];
  tags: string[];
  excludeTags: string[];
  /** A hit's whenMs must lie in [sinceMs, untilMs); 0 leaves an end open. */
  sinceMs: number;
  untilMs: number;
}

export interface ManifestQuery {
  realm: string;
  scopes: string[];
  tier: "working_set" | "full";
  k: number;
}

export interface ManifestRow {
  id: string;
  scope: string;
  kind: string;
  title: string;
  description: string;
  updatedMs: number;
  rank: number;
}

export interface LedgerEntry {
  realm: string;
  identity: string;
  session: string;
  recordId: string;
  surface: string;
  bytes: number;
  atMs: number;
}

export interface Hit {
  record: Record;
  score: number;
}

export interface Message {
  role: string;
  content: string;
}

type Maybe<T> = T | Promise<T>;

/** A plugin: info and configure, the method of each kind it declares, and
 * the method(s) of each capability it declares (CAPABILITIES). */
export interface Plugin {
  info(): Info;
  configure(config: { [key: string]: unknown }, host: HostInfo): Maybe<void>;
  recall?(q: RecallQuery): Maybe<Hit[]>;
  remember?(realm: string, records: Record[]): Maybe<string[]>;
  get?(realm: string, ids: string[]): Maybe<Record[]>;
  forget?(realm: string, ids: string[]): Maybe<number>;
  manifest?(q: ManifestQuery): Maybe<ManifestRow[]>;
  supersede?(realm: string, oldId: string, replacement: Record): Maybe<string>;
  markUsed?(realm: string, ids: string[], atMs: number): Maybe<void>;
  /** Each use's count of uses of its record at once; each id listed once. */
  countUses?(realm: string, uses: Use[], atMs: number): Maybe<void>;
  writeLedger?(entries: LedgerEntry[]): Maybe<void>;
  export?(realm: string, after: string, limit: number): Maybe<{ records: Record[]; next: string }>;
  importRecords?(realm: string, records: Record[]): Maybe<{ imported: number; skipped: number }>;
  reindex?(realm: string, progress: (done: number, total: number) => void): Maybe<number>;
  resolveOperator?(realm: string, identity: string): Maybe<string>;
  resolveMobs?(realm: string, identity: string): Maybe<string[]>;
  compact?(conversationId: string, evicted: Message[], carryOver: Message | null, idempotencyKey: string,
    maxBytes: number): Maybe<Message>;
  /** Runs once when the host stops the plugin, or dies. */
  close?(): Maybe<void>;
}

/** Each provider capability and the methods that implement it. */
export const CAPABILITIES: { [cap: string]: (keyof Plugin)[] } = {
  write: ["remember"], fetch: ["get"], forget: ["forget"], manifest: ["manifest"], supersede: ["supersede"],
  usage: ["markUsed"], usage_counts: ["countUses"], ledger: ["writeLedger"], archive: ["export", "importRecords"], reindex: ["reindex"],
};
const KIND_METHODS: { [kind: string]: keyof Plugin } = {
  provider: "recall", operator_resolver: "resolveOperator", mob_resolver: "resolveMobs", compactor: "compact",
};
const KIND_SERVICES: { [kind: string]: string } = {
  provider: "Provider", operator_resolver: "OperatorResolver", mob_resolver: "MobResolver", compactor: "Compactor",
};

const kindsOf = (i: Info) => i.kinds ?? ["provider"];

/** Throws unless p's info is well formed and p implements every kind and
 * capability it declares (serve refuses to start otherwise; call it from
 * a unit test to learn sooner). */
export function checkPlugin(p: Plugin): void {
  const info = p.info();
  const problem = records.tokenProblem(info.name, 64);
  if (problem) throw new Error("info().name " + problem);
  if (!/^\d+\.\d+\.\d+([-+].*)?$/.test(info.version)) {
    throw new Error(`info().version ${JSON.stringify(info.version)} is not a semantic version like 1.2.3`);
  }
  const kinds = kindsOf(info);
  if (!kinds.length) throw new Error("info().kinds is empty");
  for (const k of kinds) {
    const method = KIND_METHODS[k];
    if (!method) {
      throw new Error(`info().kinds names "${k}", which this SDK does not serve (it serves ${Object.keys(KIND_METHODS).join(", ")})`);
    }
    if (typeof p[method] !== "function") throw new Error(`info().kinds declares "${k}" but the plugin has no ${method} method`);
  }
  for (const c of info.capabilities ?? []) {
    const methods = CAPABILITIES[c];
    if (!methods) throw new Error(`info().capabilities names unknown capability "${c}"`);
    for (const m of methods) {
      if (typeof p[m] !== "function") throw new Error(`info().capabilities declares "${c}" but the plugin has no ${m} method`);
    }
  }
}

// The wire's messages, as proto-loader decodes them (field names as in
// the .proto, int64 as number, enums as their names, absent messages null).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Wire = any;

export function recordFromWire(m: Wire): Record {
  return records.newRecord({
    id: m.id ?? "", realm: m.realm ?? "", scope: m.scope ?? "", kind: m.kind ?? "", title: m.title ?? "",
    description: m.description ?? "", body: m.body ?? "", tags: [...(m.tags ?? [])], trust: m.trust ?? "",
    status: m.status ?? "", supersedes: m.supersedes ?? "", createdMs: m.created_unix_ms ?? 0,
    updatedMs: m.updated_unix_ms ?? 0, expiresMs: m.expires_unix_ms ?? 0, contentHash: m.content_hash ?? "",
    useCount: m.use_count ?? 0, lastUsedMs: m.last_used_unix_ms ?? 0,
    thread: m.thread ? { id: m.thread.id ?? "", seq: m.thread.seq ?? 0 } : null, occurredMs: m.occurred_unix_ms ?? 0,
  });
}

export function recordToWire(r: Record): Wire {
  return {
    id: r.id, realm: r.realm, scope: r.scope, kind: r.kind, title: r.title, description: r.description, body: r.body,
    tags: r.tags, trust: r.trust, status: r.status, supersedes: r.supersedes, created_unix_ms: r.createdMs,
    updated_unix_ms: r.updatedMs, expires_unix_ms: r.expiresMs, content_hash: r.contentHash, use_count: r.useCount,
    last_used_unix_ms: r.lastUsedMs, thread: r.thread, occurred_unix_ms: r.occurredMs,
  };
}

const rowToWire = (r: ManifestRow): Wire => ({
  id: r.id, scope: r.scope, kind: r.kind, title: r.title, description: r.description, updated_unix_ms: r.updatedMs,
  rank: r.rank,
});

/** The memhost services over one plugin; every request is validated here
 * first, so the plugin sees valid input only. */
class Services {
  readonly info: Info;

  constructor(private readonly impl: Plugin) {
    this.info = impl.info();
  }

  private need(cap: string): void {
    if (!(this.info.capabilities ?? []).includes(cap)) {
      throw new Unsupported(`capability "${cap}" is not declared by this plugin`);
    }
  }

  private call<T>(method: keyof Plugin, ...args: unknown[]): Promise<T> {
    return (this.impl[method] as (...a: unknown[]) => Maybe<T>).apply(this.impl, args) as Promise<T>;
  }

  Info(): Wire {
    const i = this.info;
    return {
      name: i.name, version: i.version, kinds: kindsOf(i), protocol_versions: [PROTOCOL_VERSION],
      capabilities: i.capabilities ?? [],
      config_schema: i.configSchema == null ? Buffer.alloc(0) : Buffer.from(JSON.stringify(i.configSchema)),
    };
  }

  async Configure(req: Wire): Promise<Wire> {
    const raw = req.config_json?.length ? Buffer.from(req.config_json).toString("utf8") : "{}";
    let config: unknown;
    try {
      config = JSON.parse(raw);
    } catch (e) {
      throw invalid("config", `is not valid JSON: ${(e as Error).message}`);
    }
    if (typeof config !== "object" || config === null || Array.isArray(config)) {
      throw invalid("config", "must be a JSON object");
    }
    const h = req.host ?? {};
    await this.impl.configure(config as { [key: string]: unknown }, {
      version: h.version ?? "", protocols: [...(h.protocol_versions ?? [])], capabilities: [...(h.capabilities ?? [])],
    });
    return {};
  }

  async Recall(req: Wire): Promise<Wire> {
    records.validateRealm(req.realm);
    records.checkScopes(req.scopes);
    if (req.limit < 0) throw invalid("limit", `${req.limit} is negative`);
    const limit = Math.min(req.limit || records.DEFAULT_RECALL_LIMIT, records.MAX_BATCH);
    records.checkIds("exclude_ids", req.exclude_ids);
    records.checkTagFilter("tags", req.tags);
    records.checkTagFilter("exclude_tags", req.exclude_tags);
    records.checkWindow(req.since_unix_ms, req.until_unix_ms);
    const hits = await this.call<Hit[]>("recall", {
      realm: req.realm, query: req.query, scopes: [...req.scopes], limit, excludeIds: [...req.exclude_ids],
      tags: [...req.tags], excludeTags: [...req.exclude_tags], sinceMs: req.since_unix_ms, untilMs: req.until_unix_ms,
    } satisfies RecallQuery);
    return { hits: hits.map((h) => ({ record: recordToWire(h.record), score: h.score })) };
  }

  async Remember(req: Wire): Promise<Wire> {
    this.need("write");
    const recs = req.records.map(recordFromWire);
    records.checkRecords(req.realm, recs, records.validateRecord);
    return { ids: await this.call<string[]>("remember", req.realm, recs) };
  }

  async Get(req: Wire): Promise<Wire> {
    this.need("fetch");
    records.validateRealm(req.realm);
    records.checkIds("ids", req.ids);
    return { records: (await this.call<Record[]>("get", req.realm, [...req.ids])).map(recordToWire) };
  }

  async Forget(req: Wire): Promise<Wire> {
    this.need("forget");
    records.validateRealm(req.realm);
    records.checkIds("ids", req.ids);
    return { forgotten: await this.call<number>("forget", req.realm, [...req.ids]) };
  }

  async Manifest(req: Wire): Promise<Wire[]> {
    this.need("manifest");
    records.validateRealm(req.realm);
    records.checkScopes(req.scopes);
    const tier = ({ MANIFEST_TIER_WORKING_SET: "working_set", MANIFEST_TIER_FULL: "full" } as const)[req.tier as string];
    if (!tier) throw invalid("tier", "must be the working set or full");
    if (req.k < 0) throw invalid("k", `${req.k} is negative`);
    const rows = await this.call<ManifestRow[]>("manifest", { realm: req.realm, scopes: [...req.scopes], tier, k: req.k });
    // An empty manifest is still one message, so the host can tell "no
    // rows" from a stream cut short.
    const out: Wire[] = [];
    for (let i = 0; i < rows.length; i += CHUNK_ROWS) out.push({ rows: rows.slice(i, i + CHUNK_ROWS).map(rowToWire) });
    return out.length ? out : [{ rows: [] }];
  }

  async Supersede(req: Wire): Promise<Wire> {
    this.need("supersede");
    const rep = recordFromWire(req.replacement ?? {});
    records.validateRealm(req.realm);
    records.validateId(req.old_id, "old_id");
    under("replacement", () => records.validateRecord({ ...rep, scope: rep.scope || "realm", kind: rep.kind || "fact" }));
    return { new_id: await this.call<string>("supersede", req.realm, req.old_id, rep) };
  }

  async MarkUsed(req: Wire): Promise<Wire> {
    this.need("usage");
    records.validateRealm(req.realm);
    records.checkIds("ids", req.ids);
    await this.call("markUsed", req.realm, [...req.ids], req.at_unix_ms || records.nowMs());
    return {};
  }

  async CountUses(req: Wire): Promise<Wire> {
    this.need("usage_counts");
    records.validateRealm(req.realm);
    const uses: Use[] = req.uses.map((u: Wire) => ({ id: u.id, count: u.count }));
    records.checkUses("uses", uses);
    await this.call("countUses", req.realm, uses, req.at_unix_ms || records.nowMs());
    return {};
  }

  async WriteLedger(req: Wire): Promise<Wire> {
    this.need("ledger");
    records.checkBatch("entries", req.entries);
    const entries: LedgerEntry[] = req.entries.map((e: Wire, i: number) => {
      const entry: LedgerEntry = {
        realm: e.realm, identity: e.identity, session: e.session, recordId: e.record_id, surface: e.surface,
        bytes: e.bytes, atMs: e.at_unix_ms,
      };
      under(`entries[${i}]`, () => records.validateLedgerEntry(entry));
      return entry;
    });
    await this.call("writeLedger", entries);
    return {};
  }

  async Export(req: Wire): Promise<Wire> {
    this.need("archive");
    records.validateRealm(req.realm);
    if (req.after) records.validateId(req.after, "after");
    if (req.limit < 0) throw invalid("limit", `${req.limit} is negative`);
    const limit = req.limit > 0 && req.limit <= records.MAX_EXPORT_PAGE ? req.limit : records.MAX_EXPORT_PAGE;
    const page = await this.call<{ records: Record[]; next: string }>("export", req.realm, req.after, limit);
    return { records: page.records.map(recordToWire), next: page.next };
  }

  async Import(req: Wire): Promise<Wire> {
    this.need("archive");
    const recs = req.records.map(recordFromWire);
    records.checkRecords(req.realm, recs, (r) => records.prepareImport(r, req.realm));
    return await this.call<{ imported: number; skipped: number }>("importRecords", req.realm, recs);
  }

  /** Streams the latest progress at most once per turn of the event loop
   * (a tight loop reporting every record sends few messages), then done;
   * a failure is sent after the count still pending. */
  async Reindex(req: Wire, send: (m: Wire) => void): Promise<void> {
    this.need("reindex");
    if (req.realm) records.validateRealm(req.realm);
    let pending: Wire | null = null;
    const flush = () => {
      if (pending) send({ progress: pending });
      pending = null;
    };
    let n: number;
    try {
      n = await this.call<number>("reindex", req.realm, (done: number, total: number) => {
        if (!pending) setImmediate(flush);
        pending = { done, total };
      });
    } finally {
      // A failed rebuild sends its latest count too, before the error, as
      // the Go SDK does: the host sees how far it got.
      flush();
    }
    send({ done: { reindexed: n } });
  }

  private identity(req: Wire): void {
    records.validateRealm(req.realm);
    records.validateId(req.identity, "identity.id");
  }

  async ResolveOperator(req: Wire): Promise<Wire> {
    this.identity(req);
    return { operator: await this.call<string>("resolveOperator", req.realm, req.identity) };
  }

  async ResolveMobs(req: Wire): Promise<Wire> {
    this.identity(req);
    return { mobs: await this.call<string[]>("resolveMobs", req.realm, req.identity) };
  }

  async Compact(req: Wire): Promise<Wire> {
    if (!req.evicted.length) throw invalid("evicted", "lists no messages");
    if (req.max_bytes < 0) throw invalid("max_bytes", `${req.max_bytes} is negative`);
    req.evicted.forEach((m: Wire, i: number) => {
      if (records.blank(m.role)) throw invalid(`evicted[${i}].role`, "must not be empty");
    });
    const msg = (m: Wire): Message => ({ role: m.role, content: m.content });
    const carry = req.carry_over ? msg(req.carry_over) : null;
    const artifact = await this.call<Message>("compact", req.conversation_id, req.evicted.map(msg), carry,
      req.idempotency_key, req.max_bytes);
    return { artifact };
  }
}

const STREAMING = new Set(["Manifest", "Reindex"]);

/** String(v), or a stand-in for a value String refuses (an object with no
 * prototype, or a toString that throws): toStatus must not throw. */
function describe(v: unknown): string {
  try {
    return String(v);
  } catch {
    return `a thrown ${typeof v} that has no string form`;
  }
}

/** e as the gRPC status the host maps back to its code. */
function toStatus(e: unknown): Partial<grpc.StatusObject> {
  e = classify(e);
  let code: grpc.status;
  let message: string;
  let details: Buffer[] = [];
  if (e instanceof MemhostError) {
    code = e.grpcCode;
    message = e.message;
    details = e.details();
  } else {
    const err = e instanceof Error ? e : new Error(describe(e));
    logger.error("call failed", { error: `${err.name}: ${err.message}`, stack: err.stack ?? "" });
    code = grpc.status.UNKNOWN;
    // The answer reaches the API's client: the error's text, never its
    // JavaScript type name (the log above has both, and the stack).
    const text = err.message.trim();
    message = text ? `the plugin failed: ${text}` : "the plugin failed; its log has the details";
  }
  // A lone surrogate (a string cut by slice() inside a character) makes
  // grpc-js's encodeURI of the message throw, and the call is never
  // answered: it goes as U+FFFD, as UTF-8 encodes it.
  message = Buffer.from(message, "utf8").toString("utf8");
  const metadata = new grpc.Metadata();
  if (details.length) metadata.set("grpc-status-details-bin", statusDetails(code, message, details));
  return { code, details: message, metadata };
}

/** Runs one call under its request id, refusing one whose deadline passed. */
export async function run<T>(
  call: { metadata: grpc.Metadata; cancelled: boolean; getDeadline(): grpc.Deadline; once(event: "cancelled", listener: () => void): unknown },
  fn: () => Promise<T>,
): Promise<T> {
  const rid = call.metadata.get("memhost-request-id")[0];
  const deadline = call.getDeadline();
  const at = Number(deadline instanceof Date ? deadline.getTime() : deadline);
  // The host ended the call (cancelled it, or its deadline passed): the
  // plugin's code learns it from checkDeadline.
  const state = { ended: false };
  call.once("cancelled", () => (state.ended = true));
  return requestId.run(typeof rid === "string" ? rid : "", () => callEnded.run(state, () => callDeadline.run(Number.isFinite(at) ? at : undefined, async () => {
    if (call.cancelled || at <= Date.now()) {
      throw new DeadlineExceeded("the call's deadline passed before it started");
    }
    return fn();
  })));
}

function implementation(services: Services, methods: string[]): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {};
  const svc = services as unknown as { [m: string]: (req: Wire, send?: (m: Wire) => void) => Maybe<Wire> };
  for (const m of methods) {
    if (STREAMING.has(m)) {
      impl[m] = (call: grpc.ServerWritableStream<Wire, Wire>) => {
        run(call, async () => {
          const out = await svc[m]!.call(services, call.request, (msg: Wire) => call.write(msg));
          for (const msg of out ?? []) call.write(msg);
        }).then(() => call.end(), (e) => call.emit("error", toStatus(e)));
      };
    } else {
      impl[m] = (call: grpc.ServerUnaryCall<Wire, Wire>, callback: grpc.sendUnaryData<Wire>) => {
        run(call, async () => svc[m]!.call(services, call.request)).then((r) => callback(null, r), (e) => callback(toStatus(e)));
      };
    }
  }
  return impl;
}

let packageDefinition: protoLoader.PackageDefinition | undefined;

/** plugin.proto, copied beside the compiled SDK by its build. */
export function loadProto(): protoLoader.PackageDefinition {
  packageDefinition ??= protoLoader.loadSync(fileURLToPath(new URL("../plugin.proto", import.meta.url)), {
    keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
  });
  return packageDefinition;
}

const raw = {
  requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b,
};

function rawService(service: string, method: string, responseStream: boolean): grpc.ServiceDefinition {
  return { [method]: { path: `/${service}/${method}`, requestStream: false, responseStream, ...raw } };
}

/** Registers grpc.health.v1.Health, plugin.GRPCController and
 * plugin.GRPCStdio on raw bytes (none of their fields needs reading),
 * and the memhost services of p's kinds. */
export function register(server: grpc.Server, p: Plugin, stop: () => void, stopped: Promise<void>): void {
  const serving = Buffer.from([0x08, 0x01]); // HealthCheckResponse{status: SERVING}
  server.addService(rawService("grpc.health.v1.Health", "Check", false), {
    Check: (_: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, serving),
  });
  server.addService(rawService("plugin.GRPCController", "Shutdown", false), {
    Shutdown: (_: unknown, cb: grpc.sendUnaryData<Buffer>) => {
      cb(null, Buffer.alloc(0));
      setImmediate(stop);
    },
  });
  // This process logs to stderr itself: keep the stream open, quiet.
  server.addService(rawService("plugin.GRPCStdio", "StreamStdio", true), {
    StreamStdio: (call: grpc.ServerWritableStream<Buffer, Buffer>) => void stopped.then(() => call.end()),
  });
  const services = new Services(p);
  const def = loadProto();
  const want = ["Plugin", ...kindsOf(services.info).map((k) => KIND_SERVICES[k]!)];
  for (const name of want) {
    const sd = def[`memhost.plugin.v1.${name}`] as grpc.ServiceDefinition;
    server.addService(sd, implementation(services, Object.keys(sd)));
  }
}

/** How long closing the plugin may take at exit: a Store call stuck
 * without end holds the lock close needs, and the process must still go. */
const CLOSE_TIMEOUT_MS = 2000;

async function closePlugin(p: Plugin): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      logger.error("close did not finish; exiting without it", { timeout_ms: CLOSE_TIMEOUT_MS });
      resolve();
    }, CLOSE_TIMEOUT_MS);
  });
  try {
    await Promise.race([Promise.resolve(p.close?.()), late]);
  } catch (e) {
    logger.error("close failed", { error: String(e) });
  } finally {
    clearTimeout(timer);
  }
}

function removeSocketDir(): void {
  const d = process.env.PLUGIN_UNIX_SOCKET_DIR ?? "";
  if (d && basename(d).startsWith(SOCKET_DIR_PREFIX)) rmSync(d, { recursive: true, force: true });
}

/** Exits once the host is gone, closing the plugin and removing the
 * socket directory no one else will: the plugin was re-parented, or the
 * host it was started by (MEMHOST_HOST_PID) no longer runs, which is how a
 * plugin whose host died before it first read its parent learns it. */
function watchParent(p: Plugin, parent: number): void {
  const host = Number.parseInt(process.env.MEMHOST_HOST_PID ?? "", 10);
  const gone = () => process.ppid !== parent || (host > 0 && !running(host));
  const leave = () => {
    logger.warn("host process is gone; exiting", { parent_pid: parent });
    void closePlugin(p).finally(() => {
      removeSocketDir();
      process.exit(0);
    });
  };
  if (gone()) return leave();
  const timer = setInterval(() => {
    if (!gone()) return;
    clearInterval(timer);
    leave();
  }, 250);
}

/** Whether process pid runs (or cannot be told not to: another user's). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

function fail(message: string): never {
  process.stderr.write(message + "\n");
  process.exit(1);
}

/** Runs p as a plugin process. Call it from the script's main; the process
 * exits once the host shut the plugin down (closing p first when it has a
 * close method), or once the host died. */
export async function serve(p: Plugin): Promise<never> {
  try {
    checkPlugin(p);
  } catch (e) {
    fail(`memhost plugin ${p.constructor.name}: ${(e as Error).message}`);
  }
  // --debug: started by hand (under a debugger) for a host to attach to
  // through MEMHOST_REATTACH_PLUGINS; no TLS, and no parent to watch.
  const debug = process.argv.slice(2).includes("--debug");
  if (!debug && process.env[COOKIE_KEY] !== COOKIE_VALUE) {
    fail("This is a memhost plugin: memhost starts it (see docs/plugins.md); it is not run by hand.");
  }
  const versions = (process.env.PLUGIN_PROTOCOL_VERSIONS ?? String(PROTOCOL_VERSION)).split(",");
  if (!debug && !versions.includes(String(PROTOCOL_VERSION))) {
    fail(`memhost plugin: the host speaks protocols ${versions.join(",")}, this SDK speaks ${PROTOCOL_VERSION}`);
  }
  // The host reads stdout's first line as the handshake and nothing after
  // it: what the plugin prints (console.log) goes to stderr, which the
  // host logs, as the Python SDK's print() does; the handshake is written
  // to file descriptor 1 itself.
  if (!debug) {
    process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;
  }
  // A promise of the plugin's code that rejects before anything awaits it
  // (two lookups started together, the first awaited last) is not the end
  // of the process, as Node would make it: the call that awaits it later
  // gets the error; this log line says it happened.
  process.on("unhandledRejection", (reason) => {
    const err = reason instanceof Error ? reason : new Error(describe(reason));
    logger.warn("a promise rejected before anything awaited it", { error: `${err.name}: ${err.message}`, stack: err.stack ?? "" });
  });
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  process.on("SIGTERM", stop);
  // The host's terminal's ^C is the host's to handle.
  process.on("SIGINT", debug ? stop : () => {});
  if (!debug) watchParent(p, process.ppid);

  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES, "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  });
  register(server, p, stop, stopped);
  const sockDir = debug ? mkdtempSync(join(tmpdir(), "mhdebug-")) : process.env.PLUGIN_UNIX_SOCKET_DIR || tmpdir();
  const sock = join(sockDir, `plugin${randomInt(1e9)}`); // grpc creates it; a fresh name is all it needs
  const clientPem = debug ? "" : process.env.PLUGIN_CLIENT_CERT ?? "";
  let line = "";
  let creds = grpc.ServerCredentials.createInsecure();
  if (clientPem) {
    const cert = serverCertificate();
    creds = grpc.ServerCredentials.createSsl(Buffer.from(clientPem),
      [{ private_key: Buffer.from(cert.keyPem), cert_chain: Buffer.from(cert.certPem) }], true);
    line = cert.line;
  }
  await new Promise<void>((resolve, reject) =>
    server.bindAsync("unix:" + sock, creds, (err) => (err ? reject(err) : resolve())));
  const name = p.info().name;
  const handshake = debug
    ? `MEMHOST_REATTACH_PLUGINS='${JSON.stringify({ [name]: { protocol: "grpc", protocol_version: PROTOCOL_VERSION, pid: process.pid, network: "unix", address: sock } })}'`
    : `1|${PROTOCOL_VERSION}|unix|${sock}|grpc|${line}`;
  writeSync(1, handshake + "\n");

  await stopped;
  await new Promise<void>((resolve) => {
    const force = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, 1000);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
  await closePlugin(p);
  try {
    unlinkSync(sock);
    if (debug) rmdirSync(sockDir);
  } catch {
    // already gone
  }
  process.exit(0);
}

