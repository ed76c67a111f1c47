// Package coordinator is memhost's recall coordinator (DESIGN section 5):
// a deterministic engine that decides what memory reaches an agent's
// context, how much, and in what framing.
//
// Four calls make up its surface. InjectForTurn answers the memory to
// deliver beside one user turn, as separate injected-context bodies (the
// user's message is never rewritten), within a per-turn cap of 20 KiB and
// a per-session ladder of 60 KiB. AssembleBuildInjection answers the
// system-prompt block for a new agent build: a behavioural protocol, an
// index of the composed scopes' records (8 KiB split by scope weight) and
// the most relevant bodies. DefangInbound neutralises forged envelope
// markers in inbound messages and tool results. OnSessionCompacted resets
// a session's ladder after its context was compacted.
//
// Every empty answer carries a typed SkipReason, counted through Metrics
// and logged once per (identity, reason), so a deployment never runs
// silently with injection off.
//
// Design choices worth knowing:
//
//   - Providers are plugins reached through a per-realm lookup; realms
//     never compose. A provider is used through host.ProviderOf, whose
//     accessors answer the capabilities it declared, never ones guessed
//     from Go types.
//   - Session state (byte counter, injected ids, cached sweep) sits behind
//     the one-method SessionStore, keyed by (realm, identity, session). The
//     default store is sharded in memory and bounded per realm (past the
//     bound the identity holding the most sessions loses its least recently
//     used one, so one identity's flood evicts its own); memhost
//     serve uses a durable one (internal/sessionstore). Coordinators
//     sharing a store share budgets. A turn renders and accounts inside one
//     store update, so concurrent turns of one session can never pass its
//     budget or inject a record twice; a turn that injects nothing writes
//     nothing.
//   - Already-injected ids are passed to the provider as excluded ids, so
//     dedup makes room for the next-best records instead of emptying turns.
//   - Rendering packs greedily: a record that does not fit is skipped and
//     the next is tried. Record text (titles, bodies, index rows) is
//     defanged and escaped, so a poisoned record cannot forge the framing.
//   - The envelope nonce is derived, never stored: HMAC-SHA256 of (realm,
//     identity, session) under the host key, so hosts sharing the key agree
//     on it and a restart keeps it. It appears only inside injected text: never in logs, errors, metrics,
//     ledger rows or other response fields.
//   - Without a selector a turn makes exactly one blocking provider call.
//     Ledger rows and usage marks go to a bounded background batcher that
//     drops (and counts) rather than block a turn; telemetry never fails a
//     turn. Flush and Close drain it.
//   - Defanging matches on a normalised view (character references
//     decoded, NFKD, case folding, the UTS #39 confusable skeleton, dashes
//     as one, invisible and whitespace characters skipped) across all of a
//     content's text-bearing blocks, edits the original text, and is
//     idempotent: its output holds no live marker.
package coordinator
