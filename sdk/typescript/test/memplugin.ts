// A KVProvider on a Map, served as a plugin process by server.test.ts.
import { KVProvider, StorageFull, decodeConfig, logger, serve } from "memhost-plugin";
import type { Config, Record, Store } from "memhost-plugin";

class MemStore implements Store {
  private readonly recs = new Map<string, Record>();
  constructor(private readonly fail: string) {}
  load(): Record[] {
    return [...this.recs.values()];
  }
  put(records: Record[]): void {
    if (records.some((r) => r.title === this.fail)) throw new StorageFull("no space left for " + this.fail);
    for (const r of records) this.recs.set(r.realm + "\0" + r.id, r);
  }
  delete(keys: [string, string][]): void {
    for (const [realm, id] of keys) this.recs.delete(realm + "\0" + id);
  }
}

function open(config: Config): Store {
  const cfg = decodeConfig(config, { fail_title: "", print: false });
  logger.info("configured", { fail_title: cfg.fail_title });
  if (cfg.print) console.log("printed at configure"); // server.test.ts: reaches stderr, the host's log
  return new MemStore(cfg.fail_title);
}

await serve(new KVProvider({ name: "memtest", version: "1.2.3", open }));
