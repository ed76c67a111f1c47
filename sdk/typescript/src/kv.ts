// A complete provider over a store that can only load, put and delete
// records: the TypeScript counterpart of the Go SDK's sdk/kvprovider (and
// the Python SDK's kv.py). The author writes a Store and an open function
// for the configuration; KVProvider does the rest: validation, dedup by
// content hash, all-or-nothing batches, supersede, usage counts, the
// manifest, the archive, and BM25 recall from an in-memory index. Every
// record lives in memory, so it suits stores of some ten thousand records.
// The Store stays the durable truth: memory changes only after the Store
// acknowledged a write.

import { checkDeadline } from "./calls.js";
import { Conflict, NotFound, Unavailable, invalid, under } from "./errors.js";
import * as records from "./records.js";
import type { Record } from "./records.js";
import type { Hit, HostInfo, Info, LedgerEntry, ManifestQuery, ManifestRow, Plugin, RecallQuery } from "./server.js";
import { Index, foldTag, tagText, terms } from "./text.js";

const HALF_LIFE_MS = 30 * 24 * 3600 * 1000;

type Maybe<T> = T | Promise<T>;

/** What KVProvider stores through. Each write is durable and all or
 * nothing before it returns (or its promise resolves). */
export interface Store {
  /** Every stored record. */
  load(): Maybe<Record[]>;
  put(records: Record[]): Maybe<void>;
  /** [realm, id] pairs. */
  delete(keys: [string, string][]): Maybe<void>;
  /** Only with the ledger option. */
  appendLedger?(entries: LedgerEntry[]): Maybe<void>;
  close?(): Maybe<void>;
}

export type Config = { [key: string]: unknown };

/** The configuration over a copy of defaults; an unknown key or a value of
 * another type than its default's is refused, naming the key. */
export function decodeConfig<T extends { [key: string]: string | number | boolean }>(config: Config, defaults: T): T {
  const out: { [key: string]: unknown } = { ...defaults };
  for (const [k, v] of Object.entries(config)) {
    if (!Object.hasOwn(defaults, k)) throw invalid(k, `unknown key (known: ${Object.keys(defaults).sort().join(", ")})`);
    const want = typeof defaults[k];
    if (typeof v !== want) throw invalid(k, `must be a ${want === "bigint" ? "number" : want}`);
    // JavaScript cannot tell a default of 1 from 1.0, so a whole-number
    // setting checks its own values.
    if (typeof v === "number" && !Number.isFinite(v)) throw invalid(k, "must be a finite number");
    out[k] = v;
  }
  return out as T;
}

export interface KVOptions {
  name: string;
  version: string;
  open: (config: Config) => Maybe<Store>;
  /** Declare the ledger capability (the Store then needs appendLedger). */
  ledger?: boolean;
  configSchema?: object;
}

const key = (realm: string, id: string) => realm + "\0" + id;

/** Calls run one at a time: a call awaiting the Store holds the lock, so
 * no other call sees memory half-updated. */
class Lock {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    // Each call starts on a turn of the event loop of its own: chained as
    // microtasks, a queue of calls over a synchronous Store ran to its
    // end before the loop read the socket again, and the host's health
    // check, unanswered, killed a plugin that was merely busy.
    const next = this.tail.then(nextTurn, nextTurn).then(fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class KVProvider implements Plugin {
  static readonly CAPABILITIES = ["write", "fetch", "forget", "manifest", "supersede", "usage", "usage_counts", "archive"];
  private readonly infoValue: Info;
  private store: Store | null = null;
  private readonly recs = new Map<string, Record>();
  /** One BM25 index per realm: a realm is ranked by its own records' statistics, so another tenant's writes never move its scores. */
  private readonly ix = new Map<string, Index>();
  private readonly lock = new Lock();

  constructor(private readonly opts: KVOptions) {
    this.infoValue = {
      name: opts.name, version: opts.version, kinds: ["provider"],
      capabilities: [...KVProvider.CAPABILITIES, ...(opts.ledger ? ["ledger"] : [])], configSchema: opts.configSchema ?? null,
    };
  }

  info(): Info {
    return this.infoValue;
  }

  configure(config: Config, _host: HostInfo): Promise<void> {
    return this.lock.run(async () => {
      if (this.store) throw new Conflict("already configured");
      const store = await this.opts.open(config);
      // newRecord fills a field the Store's records predate (occurredMs in
      // a file written by an older SDK) with its empty value.
      for (const r of await store.load()) this.apply(records.newRecord(r));
      this.store = store;
    });
  }

  /** Runs fn under the lock, unless the call's deadline passed while it
   * waited: its caller was answered already. */
  private held<T>(fn: () => Promise<T>): Promise<T> {
    return this.lock.run(async () => {
      checkDeadline();
      return fn();
    });
  }

  close(): Promise<void> {
    return this.lock.run(async () => {
      const store = this.store;
      this.store = null;
      await store?.close?.();
    });
  }

  private ready(): Store {
    if (!this.store) throw new Unavailable(`${this.infoValue.name}: not configured or closed`);
    return this.store;
  }

  private realmIndex(realm: string): Index {
    let ix = this.ix.get(realm);
    if (!ix) this.ix.set(realm, (ix = new Index()));
    return ix;
  }

  private apply(r: Record): void {
    const k = key(r.realm, r.id);
    this.recs.set(k, r);
    if (r.status === records.ACTIVE) this.realmIndex(r.realm).put(k, [tagText(r.tags), r.title, r.description, r.body]);
    else this.ix.get(r.realm)?.delete(k);
  }

  private async put(recs: Record[]): Promise<void> {
    await this.ready().put(recs);
    for (const r of recs) this.apply(r);
  }

  private findContent(realm: string, scope: string, hash: string, now: number): string {
    for (const r of this.recs.values()) {
      if (r.realm === realm && r.scope === scope && r.contentHash === hash && records.recallable(r, now)) return r.id;
    }
    return "";
  }

  recall(q: RecallQuery): Promise<Hit[]> {
    const now = records.nowMs();
    const qt = terms(q.query);
    const want = q.tags.map(foldTag);
    const unwanted = new Set(q.excludeTags.map(foldTag));
    return this.held(async () => {
      this.ready();
      const hits: Hit[] = [];
      for (const [k, r] of this.recs) {
        if (r.realm !== q.realm || !records.recallable(r, now) || (q.scopes.length && !q.scopes.includes(r.scope))) continue;
        if (q.excludeIds.includes(r.id)) continue;
        const tags = new Set(r.tags.map(foldTag));
        if (!want.every((t) => tags.has(t)) || [...tags].some((t) => unwanted.has(t))) continue;
        const when = records.whenMs(r);
        if ((q.sinceMs && when < q.sinceMs) || (q.untilMs && when >= q.untilMs)) continue;
        const score = this.ix.get(r.realm)?.score(k, qt) ?? 0;
        if (score > 0) hits.push({ record: r, score });
      }
      hits.sort((a, b) => b.score - a.score || b.record.updatedMs - a.record.updatedMs || cmp(a.record.id, b.record.id));
      return hits.slice(0, q.limit).map((h) => ({ record: records.copyRecord(h.record), score: h.score }));
    });
  }

  remember(realm: string, recs: Record[]): Promise<string[]> {
    const now = records.nowMs();
    recs.forEach((r, i) => under(`records[${i}]`, () => records.prepare(r, realm, now)));
    return this.held(async () => {
      this.ready();
      const ids: string[] = [];
      const fresh: Record[] = [];
      const batch = new Map<string, string>();
      recs.forEach((r, i) => {
        const content = r.scope + "\0" + r.contentHash;
        const found = batch.get(content) || this.findContent(realm, r.scope, r.contentHash, now);
        if (found) {
          ids.push(found);
          return;
        }
        if (this.recs.has(key(realm, r.id)) || fresh.some((f) => f.id === r.id)) {
          throw new Conflict(`record ${i}: id "${r.id}" is taken by another record`);
        }
        batch.set(content, r.id);
        ids.push(r.id);
        fresh.push(r);
      });
      if (fresh.length) await this.put(fresh);
      return ids;
    });
  }

  get(realm: string, ids: string[]): Promise<Record[]> {
    return this.held(async () => {
      this.ready();
      return ids.flatMap((id) => {
        const r = this.recs.get(key(realm, id));
        return r ? [records.copyRecord(r)] : [];
      });
    });
  }

  forget(realm: string, ids: string[]): Promise<number> {
    return this.held(async () => {
      const store = this.ready();
      const gone = [...new Set(ids)].filter((id) => this.recs.has(key(realm, id)));
      if (gone.length) {
        await store.delete(gone.map((id) => [realm, id]));
        for (const id of gone) {
          this.recs.delete(key(realm, id));
          this.ix.get(realm)?.delete(key(realm, id));
        }
      }
      return gone.length;
    });
  }

  supersede(realm: string, oldId: string, rep: Record): Promise<string> {
    const now = records.nowMs();
    return this.held(async () => {
      this.ready();
      const old = this.recs.get(key(realm, oldId));
      if (!old) throw new NotFound(`supersede ${oldId}: not found`);
      if (old.status !== records.ACTIVE) throw new Conflict(`supersede ${oldId}: it is ${old.status}, not active`);
      rep.scope ||= old.scope;
      rep.kind ||= old.kind;
      rep.supersedes = oldId;
      rep.status = records.ACTIVE;
      under("replacement", () => records.prepare(rep, realm, now));
      if (this.recs.has(key(realm, rep.id))) throw new Conflict(`replacement id "${rep.id}" is taken`);
      await this.put([rep, { ...records.copyRecord(old), status: "superseded", updatedMs: now }]);
      return rep.id;
    });
  }

  /** One use of each listed record; an id listed twice counts once. */
  markUsed(realm: string, ids: string[], atMs: number): Promise<void> {
    return this.countUses(realm, [...new Set(ids)].map((id) => ({ id, count: 1 })), atMs);
  }

  countUses(realm: string, uses: records.Use[], atMs: number): Promise<void> {
    return this.held(async () => {
      this.ready();
      const used: Record[] = [];
      for (const u of uses) {
        const prior = this.recs.get(key(realm, u.id));
        if (!prior) continue;
        const r = records.copyRecord(prior);
        r.useCount = Math.min(r.useCount + u.count, records.MAX_RECORD_USE_COUNT);
        r.lastUsedMs = Math.max(r.lastUsedMs, atMs);
        used.push(r);
      }
      if (used.length) await this.put(used);
    });
  }

  writeLedger(entries: LedgerEntry[]): Promise<void> {
    return this.held(async () => {
      const store = this.ready();
      if (entries.length) await store.appendLedger!(entries);
    });
  }

  manifest(q: ManifestQuery): Promise<ManifestRow[]> {
    if (q.tier === "working_set" && q.k <= 0) throw invalid("k", `is ${q.k}, a working set needs a positive k`);
    const now = records.nowMs();
    return this.held(async () => {
      this.ready();
      const used: ManifestRow[] = [];
      const unused: ManifestRow[] = [];
      for (const r of this.recs.values()) {
        if (r.realm !== q.realm || !records.recallable(r, now) || (q.scopes.length && !q.scopes.includes(r.scope))) continue;
        const row = {
          id: r.id, scope: r.scope, kind: r.kind, title: r.title, description: r.description, updatedMs: r.updatedMs,
          rank: r.useCount ? usageRank(r, now) : 0,
        };
        (r.useCount ? used : unused).push(row);
      }
      const newest = (a: ManifestRow, b: ManifestRow) => b.updatedMs - a.updatedMs || cmp(a.id, b.id);
      if (q.tier === "full") return [...used, ...unused].sort(newest);
      used.sort((a, b) => b.rank - a.rank || newest(a, b));
      const top = used.slice(0, q.k);
      return [...top, ...unused.sort(newest).slice(0, Math.max(0, 2 * q.k - top.length))];
    });
  }

  export(realm: string, after: string, limit: number): Promise<{ records: Record[]; next: string }> {
    return this.held(async () => {
      this.ready();
      const ids = [...this.recs.values()].filter((r) => r.realm === realm && r.id > after).map((r) => r.id).sort(cmp);
      const page = ids.slice(0, limit).map((id) => records.copyRecord(this.recs.get(key(realm, id))!));
      return { records: page, next: ids.length > limit ? ids[limit - 1]! : "" };
    });
  }

  importRecords(realm: string, recs: Record[]): Promise<{ imported: number; skipped: number }> {
    const now = records.nowMs();
    return this.held(async () => {
      this.ready();
      const fresh: Record[] = [];
      const seen = new Set<string>();
      const batch = new Set<string>();
      let skipped = 0;
      for (const r of recs) {
        const content = r.scope + "\0" + r.contentHash;
        const live = records.recallable(r, now);
        const held = this.recs.get(key(realm, r.id));
        if (held && !seen.has(r.id) && records.importRetires(held, r)) {
          // A newer export of the record: it was retired since
          // (superseded, tombstoned), and leaves recall here too.
          const moved = records.copyRecord(held);
          moved.status = r.status;
          moved.updatedMs = Math.max(held.updatedMs, r.updatedMs);
          seen.add(r.id);
          fresh.push(moved);
          continue;
        }
        if (seen.has(r.id) || this.recs.has(key(realm, r.id)) ||
          (live && (batch.has(content) || this.findContent(realm, r.scope, r.contentHash, now)))) {
          skipped++;
          continue;
        }
        seen.add(r.id);
        if (live) batch.add(content);
        fresh.push(r);
      }
      if (fresh.length) await this.put(fresh);
      return { imported: fresh.length, skipped };
    });
  }
}


// Code-unit order: ids are ASCII, where it is byte order, as in Go.
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The Go providers' usage rank: uses decay by half every 30 days. */
function usageRank(r: Record, now: number): number {
  const k = r.lastUsedMs / HALF_LIFE_MS + Math.log2(r.useCount);
  return Math.max(2 ** (k - now / HALF_LIFE_MS), Number.MIN_VALUE);
}

