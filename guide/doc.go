// Package guide is memhost's memory guide (DESIGN section 6): it recalls
// memory into an agent's context at two points.
//
//   - Session start: the task description is the query. An error is
//     fatal to the session.
//   - Before every model iteration: the last user message is the query,
//     and the new block replaces the previous one. An error is logged and
//     the previous block stays.
//
// Filters narrow the answer: top_k (default 5), min_score in [0, 1] (the
// share of the query's distinct terms found among a record's terms), tags
// a record must all carry, and tags it must carry none of (case-folded).
// With any filter on the guide over-fetches top_k*3 candidates, and when
// the filters still starve the answer it fetches once more, top_k*10.
// Survivors are re-sorted by their local score.
//
// Every iteration recalls (a message without a query term, such as an
// empty one, recalls the last query), so a
// record forgotten since leaves the block; when the recall renders what
// the last one did, the guide answers its previous block byte for byte,
// which keeps model prefix caches warm. Recalled text is rendered through the
// coordinator's envelope: untrusted framing, the session's nonce, escaping
// and a byte cap.
//
// Go embedders use Guide with the small Context type inside their agent
// loop; the host serves Sessions, the same guide keyed by (identity,
// session), through its HTTP API. Its bound takes its victims from the
// realm holding the most sessions and, in it, the identity holding the
// most, least recently used first, so a tenant's burst pushes out its own
// sessions, not those of a tenant holding fewer.
package guide
