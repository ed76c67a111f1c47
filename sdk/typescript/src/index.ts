// The memhost plugin SDK for TypeScript: serve a provider (or a resolver
// or compactor) written in TypeScript to memhost over the plugin protocol
// (docs/protocol.md). A provider is any object with info(), configure()
// and recall(); each optional capability is one more method
// (CAPABILITIES). KVProvider is a complete provider over a store that
// only loads, puts and deletes.

export { checkDeadline, timeRemaining } from "./calls.js";
export * from "./errors.js";
export { KVProvider, decodeConfig } from "./kv.js";
export type { Config, KVOptions, Store } from "./kv.js";
export { Logger, logger } from "./log.js";
export { contentHash, copyRecord, newRecord, newRecordId, nowMs, prepare, prepareImport, recallable, validateRecord, whenMs } from "./records.js";
export type { Record } from "./records.js";
export { CAPABILITIES, PROTOCOL_VERSION, checkPlugin, serve } from "./server.js";
export type {
  Hit, HostInfo, Info, LedgerEntry, ManifestQuery, ManifestRow, Message, Plugin, RecallQuery,
} from "./server.js";
