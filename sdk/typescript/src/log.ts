// Logging that reaches the host as the Go SDK's does: JSON lines on
// stderr in hclog's shape, which the host re-logs under the plugin
// instance's name at the line's level (docs/protocol.md, "Logging").

import { AsyncLocalStorage } from "node:async_hooks";
import { writeSync } from "node:fs";

export const LEVELS = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 } as const;
export type Level = keyof typeof LEVELS;

/** The id of the host request the current call serves (gRPC metadata
 * memhost-request-id); the server runs each call inside it. */
export const requestId = new AsyncLocalStorage<string>();

export type Fields = { [key: string]: unknown };

// The host's bounds (sdk/host/log.go): it shows at most MAX_VALUE_BYTES of
// a value, and cuts a line past MAX_LINE_BYTES, which then is no JSON and
// is logged as raw text at info, whatever its level (an error's line with
// a large exception text in it, say).
export const MAX_VALUE_BYTES = 4 << 10;
export const MAX_LINE_BYTES = 64 << 10;
const KEPT = ["@level", "@message", "@timestamp", "request_id"];

/** s cut to the MAX_VALUE_BYTES the host shows, at a character's start. */
function bounded(s: string): string {
  const data = Buffer.from(s, "utf8");
  if (data.length <= MAX_VALUE_BYTES) return s;
  let n = MAX_VALUE_BYTES;
  while (n > 0 && (data[n]! & 0xc0) === 0x80) n--;
  return data.subarray(0, n).toString("utf8") + "\u2026";
}

/** hclog's timestamp: RFC 3339 in UTC with microseconds. */
function timestamp(d: Date): string {
  return d.toISOString().replace(/Z$/, "000Z");
}

/** logger.info("opened store", { path }): one JSON line per call. */
export class Logger {
  private readonly min: number;

  constructor(
    private readonly fd = 2,
    level = process.env.MEMHOST_LOG_LEVEL ?? "info",
  ) {
    this.min = LEVELS[level.toLowerCase() as Level] ?? LEVELS.info;
  }

  log(level: Level, message: string, fields: Fields = {}): void {
    if (LEVELS[level] < this.min) return;
    const line: Fields = { "@level": level, "@message": bounded(String(message)), "@timestamp": timestamp(new Date()) };
    const rid = requestId.getStore();
    if (rid) line.request_id = rid;
    for (let [k, v] of Object.entries(fields)) {
      // The host reads the line's level, message and time from its "@"
      // keys, the last of a repeated key winning: a field of such a name
      // is kept under plugin@<name>, as the host names one.
      if (k.startsWith("@")) k = "plugin" + k;
      const plain = v === null || ["string", "number", "boolean"].includes(typeof v) ? v : String(v);
      line[k] = typeof plain === "string" ? bounded(plain) : plain;
    }
    let data = JSON.stringify(line) + "\n";
    if (Buffer.byteLength(data) >= MAX_LINE_BYTES) {
      // Still too long (many fields, or escapes): the line keeps its level
      // and message, and says what it dropped.
      const kept: Fields = Object.fromEntries(KEPT.filter((k) => k in line).map((k) => [k, line[k]]));
      kept.dropped_fields = Object.keys(line).length - Object.keys(kept).length;
      data = JSON.stringify(kept) + "\n";
    }
    // One synchronous write per line: lines never interleave, and a line
    // written just before the process exits is not lost in a buffer. A
    // host that is gone must not kill the plugin.
    try {
      writeSync(this.fd, data);
    } catch {
      // nowhere left to report it
    }
  }

  trace(message: string, fields?: Fields): void {
    this.log("trace", message, fields);
  }
  debug(message: string, fields?: Fields): void {
    this.log("debug", message, fields);
  }
  info(message: string, fields?: Fields): void {
    this.log("info", message, fields);
  }
  warn(message: string, fields?: Fields): void {
    this.log("warn", message, fields);
  }
  error(message: string, fields?: Fields): void {
    this.log("error", message, fields);
  }
}

export const logger = new Logger();
