// Package sdk is what a memhost plugin is written against: the record
// model, the plugin interfaces, capabilities, errors, a config decoder, a
// logger, and Serve. It is the whole author's API; the host's side of the
// connection lives in sdk/host, the conformance kit in sdk/conformance.
//
// A plugin is a program whose main calls Serve with a value implementing
// Plugin (Info and Configure) and the interface of every kind it declares
// in Info.Kinds. A provider implements Provider (Recall) and, for every
// capability it declares in Info.Capabilities, that capability's interface:
//
//	CapWrite        RecordWriter     Remember
//	CapFetch        RecordGetter     Get
//	CapForget       RecordForgetter  Forget
//	CapManifest     ManifestLister   Manifest
//	CapSupersede    Superseder       Supersede
//	CapUsage        UsageMarker      MarkUsed
//	CapLedger       LedgerWriter     WriteLedger
//	CapArchive      Archiver         Export, Import
//	CapReindex      Reindexer        Reindex
//	CapVectors      VectorStore      PutVectors, MissingVectors
//	CapUsageCounts  UsageCounter     CountUses
//	CapNeighbours   ThreadReader     ReadThread
//
// Serve refuses to start a plugin that declares what it does not
// implement (CheckPlugin says why; call it from a test).
//
// Serve validates every request before the plugin sees it: realms, scopes,
// ids, batch sizes and recall limits are checked (a recall limit of 0
// arrives as DefaultRecallLimit), and records arrive without store-owned
// fields (status, use count, content hash, timestamps), which the wire
// cannot carry. Record.Prepare fills those and checks the content. Import
// is the one call that carries full records; each arrives having passed
// Record.PrepareImport.
//
// Errors: return an error wrapping one of the Err sentinels; the host sees
// the same sentinel (errors.Is works across the process boundary). Return a
// *FieldError to name the refused field: the host reports it, and an HTTP
// caller gets a 400 naming it. DecodeConfig does so for configuration.
//
// Logging: use Logger, from anywhere and at any time. Lines reach the
// host's log under the plugin instance's name, in the host's format and
// at its level. Never write to stdout.
//
// Configure may read the calling host's version and features with HostFrom.
//
// See docs/plugin-authoring.md for a walkthrough, examples/journal for a
// complete provider, and sdk/conformance for the test kit.
package sdk
