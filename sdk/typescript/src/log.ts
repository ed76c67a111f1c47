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
    const line: Fields = { "@level": level, "@message": String(message), "@timestamp": timestamp(new Date()) };
    const rid = requestId.getStore();
    if (rid) line.request_id = rid;
    for (const [k, v] of Object.entries(fields)) {
      line[k] = v === null || ["string", "number", "boolean"].includes(typeof v) ? v : String(v);
    }
    // One synchronous write per line: lines never interleave, and a line
    // written just before the process exits is not lost in a buffer. A
    // host that is gone must not kill the plugin.
    try {
      writeSync(this.fd, JSON.stringify(line) + "\n");
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
