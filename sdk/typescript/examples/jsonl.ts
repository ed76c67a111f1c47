#!/usr/bin/env node
// An example memhost provider in TypeScript: records in a JSON lines file,
// one appended line per acknowledged change; everything else from the
// SDK's KVProvider.

import * as fs from "node:fs";
import * as path from "node:path";

import { KVProvider, ReadOnly, StorageFull, decodeConfig, invalid, logger, serve } from "memhost-plugin";
import type { Config, LedgerEntry, Record, Store } from "memhost-plugin";

type Line = { put?: Record[]; delete?: [string, string][]; ledger?: LedgerEntry[] };

/** Each change is one line, written and fsynced before it is acknowledged,
 * so a kill -9 (or a power cut) loses no answered write. A line cut short
 * by a crash was never acknowledged: opening the file drops it. */
class JsonlStore implements Store {
  private readonly fd: number;
  private size: number;
  private readonly recs = new Map<string, Record>();

  constructor(file: string) {
    const fresh = !fs.existsSync(file);
    this.fd = fs.openSync(file, "a+");
    const data = fs.readFileSync(file, "utf8");
    const whole = data.slice(0, data.lastIndexOf("\n") + 1);
    this.size = Buffer.byteLength(whole);
    if (whole.length < data.length) fs.ftruncateSync(this.fd, this.size);
    whole.split("\n").slice(0, -1).forEach((text, i) => {
      const line = parseLine(text, `${file}:${i + 1}`);
      for (const r of line.put ?? []) this.recs.set(r.realm + "\0" + r.id, r);
      for (const [realm, id] of line.delete ?? []) this.recs.delete(realm + "\0" + id);
    });
    if (fresh) fsyncDir(path.dirname(file)); // the new file's name is durable too
  }

  load(): Record[] {
    return [...this.recs.values()];
  }

  put(records: Record[]): void {
    this.append({ put: records });
  }

  delete(keys: [string, string][]): void {
    this.append({ delete: keys });
  }

  appendLedger(entries: LedgerEntry[]): void {
    this.append({ ledger: entries });
  }

  private append(line: Line): void {
    const data = Buffer.from(JSON.stringify(line) + "\n");
    try {
      if (fs.writeSync(this.fd, data) < data.length) throw Object.assign(new Error("short write"), { code: "ENOSPC" });
      fs.fsyncSync(this.fd);
      this.size += data.length;
    } catch (e) {
      fs.ftruncateSync(this.fd, this.size); // no half line for the next write to follow
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOSPC" || code === "EDQUOT" || code === "EFBIG") throw new StorageFull(String(e));
      if (code === "EROFS") throw new ReadOnly(String(e));
      throw e;
    }
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

// A whole line that does not parse: the file is damaged; refuse to guess.
function parseLine(text: string, where: string): Line {
  try {
    return JSON.parse(text) as Line;
  } catch (e) {
    throw new Error(`${where}: ${(e as Error).message}`);
  }
}

function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, "r");
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

function open(config: Config): Store {
  const cfg = decodeConfig(config, { path: "memory.jsonl" });
  if (!cfg.path) throw invalid("path", "must not be empty");
  logger.info("store opened", { path: cfg.path });
  return new JsonlStore(cfg.path);
}

await serve(new KVProvider({ name: "jsonlts", version: "0.1.0", open, ledger: true }));
