// A provider whose recall misbehaves on cue, served as a plugin process by
// hardening.test.ts: the query names what it does.
import { NotFound, serve } from "memhost-plugin";
import type { Plugin } from "memhost-plugin";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const plugin: Plugin = {
  info: () => ({ name: "hostile", version: "1.0.0", capabilities: ["write", "archive", "ledger"] }),
  configure() {},
  async recall(q) {
    if (q.query === "race") {
      // Two lookups at once, the first awaited last: it fails while the
      // second is still awaited, which Node calls an unhandled rejection.
      const first = sleep(10).then(() => Promise.reject(new Error("first lookup failed")));
      await sleep(100);
      return await first;
    }
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    if (q.query === "odd") throw Object.create(null); // no toString: String() of it throws
    if (q.query === "typeerror") return (undefined as unknown as { hits: [] }).hits;
    if (q.query === "empty") throw new RangeError();
    // Cut at a UTF-16 code unit, as slice() does: half of the emoji stays.
    if (q.query === "surrogate") throw new NotFound(`no record titled ${"deploy 🚀".slice(0, 8)}`);
    return [];
  },
  remember: (_realm, recs) => recs.map((_, i) => `r${i}`),
  export: () => ({ records: [], next: "" }),
  importRecords: (_realm, recs) => ({ imported: recs.length, skipped: 0 }),
  writeLedger() {},
};

await serve(plugin);
