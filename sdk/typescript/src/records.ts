// Records, scopes and the input rules every memhost store applies: a port
// of the Go SDK's record.go, scope.go and validate.go (and of the Python
// SDK's records.py) with the same limits, field paths and problems, so a
// TypeScript plugin refuses exactly what a Go one refuses
// (docs/protocol.md, section 7).

import { createHash, randomBytes } from "node:crypto";

import { invalid, tooLarge, under } from "./errors.js";

export const MAX_TITLE_BYTES = 200;
export const MAX_DESCRIPTION_BYTES = 400;
export const MAX_BODY_BYTES = 64 << 10;
export const MAX_TAGS = 32;
export const MAX_TAG_BYTES = 64;
export const MAX_ID_BYTES = 128;
export const MAX_THREAD_ID_BYTES = 128;
export const MAX_BATCH = 1000;
export const MAX_EXPORT_PAGE = 1000;
/** A record's use_count stops here (2^53 - 1, exact in every JSON reader); an import over it is refused. */
export const MAX_RECORD_USE_COUNT = Number.MAX_SAFE_INTEGER;
export const DEFAULT_RECALL_LIMIT = 10;

export const RECORD_KINDS = ["preference", "fact", "gotcha", "procedure", "relationship", "open_loop", "reference", "episode"];
export const TRUST_LEVELS = ["untrusted", "agent_observed", "agent_verified", "application", "operator"];
export const STATUSES = ["active", "superseded", "quarantined", "tombstoned"];
export const ACTIVE = "active";

/** One memory. Times are Unix milliseconds; expiresMs 0 never expires;
 * occurredMs is when the remembered thing happened, 0 when unknown. */
export interface Record {
  id: string;
  realm: string;
  scope: string;
  kind: string;
  title: string;
  description: string;
  body: string;
  tags: string[];
  trust: string;
  status: string;
  supersedes: string;
  createdMs: number;
  updatedMs: number;
  expiresMs: number;
  contentHash: string;
  useCount: number;
  lastUsedMs: number;
  thread: { id: string; seq: number } | null;
  occurredMs: number;
}

/** A record with every field empty but those given. */
/** What Go's unicode.IsSpace calls space, which the host's strings.TrimSpace
 * trims: String.prototype.trim also trims U+FEFF, which the host keeps. */
const GO_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** Whether s is empty once trimmed as the host trims it. */
export function blank(s: string): boolean {
  return GO_SPACE.test(s);
}

export function newRecord(fields: Partial<Record> = {}): Record {
  return {
    id: "", realm: "", scope: "", kind: "", title: "", description: "", body: "", tags: [], trust: "", status: "",
    supersedes: "", createdMs: 0, updatedMs: 0, expiresMs: 0, contentHash: "", useCount: 0, lastUsedMs: 0, thread: null,
    occurredMs: 0, ...fields,
  };
}

export function copyRecord(r: Record): Record {
  return { ...r, tags: [...r.tags], thread: r.thread && { ...r.thread } };
}

export function recallable(r: Record, nowMs: number): boolean {
  return r.status === ACTIVE && (r.expiresMs === 0 || nowMs < r.expiresMs);
}

/** The time recall's since/until judge: occurredMs, else createdMs. */
export function whenMs(r: Record): number {
  return r.occurredMs || r.createdMs;
}

export function nowMs(): number {
  return Date.now();
}

/** sha256 over title, a NUL and body: the identity of a record's content. */
export function contentHash(title: string, body: string): string {
  return createHash("sha256").update(title, "utf8").update("\0").update(body, "utf8").digest("hex");
}

/** A fresh id: the creation time in milliseconds, then 64 random bits. */
export function newRecordId(atMs = nowMs()): string {
  return "r" + atMs.toString(16).padStart(11, "0") + randomBytes(8).toString("hex");
}

const bytes = (s: string) => Buffer.byteLength(s, "utf8");
const quote = (s: string) => '"' + s.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';

/** Why s is not a safe token (1-limit bytes of ASCII letters, digits,
 * '-', '_' and '.', not starting with '.'), or "". */
export function tokenProblem(s: string, limit: number): string {
  if (s === "") return "must not be empty";
  if (bytes(s) > limit) return `is ${bytes(s)} bytes, the limit is ${limit}`;
  if (s.startsWith(".")) return `${quote(s)} must not start with '.'`;
  if (!/^[A-Za-z0-9._-]+$/.test(s)) return `${quote(s)} may hold only letters, digits, '-', '_' and '.'`;
  return "";
}

export function validateId(id: string, field = "id"): void {
  const p = tokenProblem(id, MAX_ID_BYTES);
  if (p) throw invalid(field, p);
}

export function validateRealm(realm: string): void {
  const p = tokenProblem(realm, 64);
  if (p) throw invalid("realm", p);
}

export function validateScope(scope: string, field = "scope"): void {
  if (scope === "realm") return;
  const sep = scope.indexOf(":");
  if (sep < 0) throw invalid(field, `${quote(scope)} is not identity:<id>, mob:<name>, operator:<name> or realm`);
  const cls = scope.slice(0, sep);
  if (!["identity", "mob", "operator"].includes(cls)) {
    throw invalid(field, `unknown scope class ${quote(cls)} in ${quote(scope)}`);
  }
  const p = tokenProblem(scope.slice(sep + 1), MAX_ID_BYTES);
  if (p) throw invalid(field, `name in ${quote(scope)} ${p}`);
}

function checkText(field: string, s: string, limit: number): void {
  if (bytes(s) > limit) throw tooLarge(field, `is ${bytes(s)} bytes, the limit is ${limit}`);
  if (s.includes("\0")) throw invalid(field, "contains a NUL byte");
}

function checkTag(field: string, t: string): void {
  checkText(field, t, MAX_TAG_BYTES);
  if (blank(t) || /[\n\r\t,]/.test(t)) {
    throw invalid(field, `tag ${quote(t)} must be non-blank and hold no comma, tab or line break`);
  }
}

function oneOf(field: string, what: string, v: string, allowed: string[]): void {
  if (!allowed.includes(v)) throw invalid(field, `unknown ${what} ${quote(v)} (want one of ${allowed.join(", ")})`);
}

/** Checks every field against the record limits; the id, times and hash
 * may be empty (prepare fills them). */
export function validateRecord(r: Record): void {
  if (r.id) validateId(r.id);
  if (r.realm) validateRealm(r.realm);
  validateScope(r.scope);
  oneOf("kind", "kind", r.kind, RECORD_KINDS);
  if (r.trust) oneOf("trust", "trust", r.trust, TRUST_LEVELS);
  if (r.status) oneOf("status", "status", r.status, STATUSES);
  checkText("title", r.title, MAX_TITLE_BYTES);
  checkText("description", r.description, MAX_DESCRIPTION_BYTES);
  checkText("body", r.body, MAX_BODY_BYTES);
  if (blank(r.title) && blank(r.body)) throw invalid("title", "title and body are both empty");
  if (r.tags.length > MAX_TAGS) throw tooLarge("tags", `${r.tags.length} tags, the limit is ${MAX_TAGS}`);
  r.tags.forEach((t, i) => checkTag(`tags[${i}]`, t));
  if (r.supersedes) {
    const p = tokenProblem(r.supersedes, MAX_ID_BYTES);
    if (p) throw invalid("supersedes", "id: " + p);
  }
  // Every time a record carries must be one every store and the RFC 3339
  // form can hold (the Go SDK's Record.Validate).
  const times: [string, number][] = [["occurred_at", r.occurredMs], ["expires_at", r.expiresMs], ["created_at", r.createdMs],
    ["updated_at", r.updatedMs], ["last_used_at", r.lastUsedMs]];
  for (const [field, ms] of times) checkTime(field, ms);
  if (r.thread) {
    checkText("thread.id", r.thread.id, MAX_THREAD_ID_BYTES);
    if (blank(r.thread.id)) throw invalid("thread.id", "is blank: a thread needs an id");
    if (r.thread.seq < 0) throw invalid("thread.seq", `is ${r.thread.seq}, want 0 or more`);
    // A seq arrives as a JavaScript number: past 2^53-1 it is no longer the
    // one sent, and storing it would store another place.
    if (!Number.isSafeInteger(r.thread.seq)) {
      throw invalid("thread.seq", `is past ${Number.MAX_SAFE_INTEGER}, the largest this plugin holds exactly`);
    }
  }
}

// Unix milliseconds of 0001-01-01 and 10000-01-01 UTC: the years every store
// and the RFC 3339 form of a time can hold (the Go SDK's CheckTime).
const MIN_MS = -62135596800000;
const END_MS = 253402300800000;

/** Refuses a time outside the years 1-9999; 0 (unset) passes. */
export function checkTime(field: string, ms: number): void {
  if (ms && !(ms >= MIN_MS && ms < END_MS)) throw invalid(field, `${ms} ms is outside the years 1-9999`);
}

/** Checks a recall's since/until (0 leaves an end open), as the Go SDK's
 * ValidateWindow does. */
export function checkWindow(sinceMs: number, untilMs: number): void {
  checkTime("since", sinceMs);
  checkTime("until", untilMs);
  if (sinceMs && untilMs && sinceMs >= untilMs) throw invalid("until", `${untilMs} ms is not after since ${sinceMs} ms`);
}

export const MAX_LEDGER_SURFACE_BYTES = 64;
export const MAX_LEDGER_SESSION_BYTES = 256;

/** The Go SDK's LedgerEntry.Validate: the identity and record id, a surface
 * that is not blank, surface and session as plain text within their
 * limits, bytes not negative. */
export function validateLedgerEntry(e: { realm: string; identity: string; session: string; recordId: string; surface: string; bytes: number }): void {
  validateRealm(e.realm);
  validateId(e.identity, "identity.id");
  validateId(e.recordId, "record_id");
  if (blank(e.surface)) throw invalid("surface", "is empty");
  checkText("surface", e.surface, MAX_LEDGER_SURFACE_BYTES);
  checkText("session", e.session, MAX_LEDGER_SESSION_BYTES);
  if (e.bytes < 0) throw invalid("bytes", `is ${e.bytes}, must not be negative`);
}

/** Checks a recall filter's tags by the rules of a record's tags, as the
 * Go SDK's ValidateTagFilter does: every refusal is invalid (400). */
export function checkTagFilter(field: string, tags: string[]): void {
  if (tags.length > MAX_BATCH) throw invalid(field, `${tags.length} tags, the limit is ${MAX_BATCH}`);
  tags.forEach((t, i) => checkTag(`${field}[${i}]`, t));
}

function ownRealm(r: Record, realm: string, what: string): void {
  if (!r.realm) r.realm = realm;
  if (r.realm !== realm) throw invalid("realm", `record names realm ${quote(r.realm)} inside ${what} realm ${quote(realm)}`);
}

/** Validates a record about to be stored in realm and fills what the store
 * owns: realm, id, default trust and status, times, content hash. */
export function prepare(r: Record, realm: string, atMs: number): void {
  ownRealm(r, realm, "a write to");
  r.trust ||= "agent_observed";
  r.status ||= ACTIVE;
  validateRecord(r);
  r.id ||= newRecordId(atMs);
  r.createdMs ||= atMs;
  r.updatedMs = atMs;
  r.contentHash = contentHash(r.title, r.body);
}

/** Validates a full record about to be imported as it stands. */
export function prepareImport(r: Record, realm: string): void {
  ownRealm(r, realm, "an import to");
  validateRecord(r);
  const missing: [string, boolean][] = [
    ["id", !r.id], ["status", !r.status], ["trust", !r.trust], ["created_at", !r.createdMs], ["updated_at", !r.updatedMs],
  ];
  for (const [field, gone] of missing) {
    if (gone) throw invalid(field, "is required on an imported record");
  }
  if (r.useCount < 0) throw invalid("use_count", "is negative");
  if (r.useCount > MAX_RECORD_USE_COUNT) {
    throw invalid("use_count", `${r.useCount} is over the most a record may have been used, ${MAX_RECORD_USE_COUNT}`);
  }
  const h = contentHash(r.title, r.body);
  if (r.contentHash && r.contentHash !== h) throw invalid("content_hash", "does not match the title and body");
  r.contentHash = h;
}

// Request checks, in the order the Go SDK's server runs them.

export function checkIds(field: string, ids: string[]): void {
  if (ids.length > MAX_BATCH) throw tooLarge(field, `${ids.length} ids in one call, the limit is ${MAX_BATCH}`);
  ids.forEach((id, i) => validateId(id, `${field}[${i}]`));
}

export const MAX_USE_COUNT = 1_000_000;

/** A use of a record counted Count times (the usage_counts capability). */
export interface Use {
  id: string;
  count: number;
}

/** A CountUses list: at most MAX_BATCH, each id valid and listed once, each count 1..MAX_USE_COUNT. */
export function checkUses(field: string, uses: Use[]): void {
  checkBatch(field, uses);
  const seen = new Map<string, number>();
  uses.forEach((u, i) => {
    const at = `${field}[${i}]`;
    validateId(u.id, `${at}.id`);
    const j = seen.get(u.id);
    if (j !== undefined) throw invalid(`${at}.id`, `${quote(u.id)} is listed at ${j} too; list each id once with its count`);
    seen.set(u.id, i);
    if (!Number.isInteger(u.count) || u.count < 1 || u.count > MAX_USE_COUNT) {
      throw invalid(`${at}.count`, `${u.count} is outside 1..${MAX_USE_COUNT}`);
    }
  });
}

export function checkScopes(scopes: string[]): void {
  scopes.forEach((s, i) => validateScope(s, `scopes[${i}]`));
}

export function checkBatch(field: string, items: unknown[]): void {
  if (items.length > MAX_BATCH) {
    throw tooLarge(field, `${items.length} ${field} in one call, the limit is ${MAX_BATCH}`);
  }
}

export function checkRecords(realm: string, records: Record[], check: (r: Record) => void): void {
  validateRealm(realm);
  checkBatch("records", records);
  records.forEach((r, i) => under(`records[${i}]`, () => check(r)));
}

// importRetires reports whether importing r moves the stored record of its
// id on to r's later status, in place of skipping it (Go's
// sdk.ImportRetires): the same content in the same scope, stored active and
// r superseded or tombstoned, or stored superseded and r tombstoned. Never
// back to an earlier status, and never a pending proposal (quarantined).
export function importRetires(stored: Record, r: Record): boolean {
  if (stored.id !== r.id || stored.scope !== r.scope || contentHash(stored.title, stored.body) !== contentHash(r.title, r.body)) {
    return false;
  }
  if (stored.status === ACTIVE) return r.status === "superseded" || r.status === "tombstoned";
  if (stored.status === "superseded") return r.status === "tombstoned";
  return false;
}
