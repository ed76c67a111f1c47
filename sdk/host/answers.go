package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ErrBadAnswer marks a plugin answer that breaks the protocol: a hit of a
// realm or scope the call did not ask for, more hits than the limit, an
// id answered twice, a score that is no number. The host refuses the
// whole answer rather than pass any of it on, so one tenant never sees
// another's records through a broken plugin. It wraps no sdk sentinel:
// the plugin is at fault, not the caller.
var ErrBadAnswer = errors.New("the plugin's answer breaks the protocol")

// badAnswer reports what is wrong with an answer to call. The problem
// names indexes, never another realm's or scope's values: the message
// may reach the caller.
func badAnswer(call, problem string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", call, fmt.Sprintf(problem, args...), ErrBadAnswer)
}

// recallLimit is the most hits an answer to q may hold: the SDK's server
// defaults a zero limit and caps a large one the same way.
func recallLimit(q sdk.RecallQuery) int {
	switch {
	case q.Limit <= 0:
		return sdk.DefaultRecallLimit
	case q.Limit > sdk.MaxBatch:
		return sdk.MaxBatch
	}
	return q.Limit
}

// pageLimit is the most ids or records a page of Export or MissingVectors
// may hold for limit.
func pageLimit(limit int) int {
	if limit <= 0 || limit > sdk.MaxExportPage {
		return sdk.MaxExportPage
	}
	return limit
}

// checkHits holds a recall answer to the query's contract: at most the
// limit, each hit a safe id of the asked realm and scopes, active, not
// excluded, inside the time window, listed once, with a finite score.
func checkHits(q sdk.RecallQuery, hits []sdk.Hit) error {
	if limit := recallLimit(q); len(hits) > limit {
		return badAnswer("recall", "%d hits, over the limit %d", len(hits), limit)
	}
	excluded := memberOf(q.ExcludeIDs)
	since, until := q.WindowMillis()
	for i := range hits {
		h := &hits[i]
		r := &h.Record
		var problem string
		switch {
		case sdk.ValidateID(r.ID) != nil:
			problem = "has no valid id"
		case r.Realm != q.Realm:
			problem = "is a record of another realm than the one asked"
		case len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope):
			problem = "is a record of a scope the query did not ask for"
		case r.Status != sdk.StatusActive:
			problem = "is a record that is not active"
		case excluded(r.ID):
			problem = "is a record the query excluded"
		case (since != 0 || until != 0) && !inWindowMillis(r.When(), since, until):
			// A plugin built before since/until ignores them: the filter
			// is a hard one, and such an answer breaks it.
			problem = "is a record outside the query's time window"
		case math.IsNaN(h.Score) || math.IsInf(h.Score, 0):
			problem = "has a score that is not a finite number"
		default:
			problem = recordShape(r)
		}
		if problem != "" {
			return badAnswer("recall", "hit %d %s", i, problem)
		}
	}
	if i, j := repeated(len(hits), func(i int) string { return hits[i].Record.ID }); i >= 0 {
		return badAnswer("recall", "hits %d and %d are the same record", j, i)
	}
	return checkNeighbours(q, hits, excluded)
}

// inWindowMillis judges t against a window of sdk.RecallQuery.WindowMillis
// as the stores do: in whole milliseconds, the epoch as the millisecond
// before it.
func inWindowMillis(t time.Time, since, until int64) bool {
	ms := t.UnixMilli()
	if ms == 0 {
		ms = -1
	}
	return (since == 0 || ms >= since) && (until == 0 || ms < until)
}

// checkNeighbours holds each hit's neighbours to what was asked: records
// of its realm, scope and thread within q.Neighbours places of it, active,
// not excluded, inside the time window, no record twice among the
// neighbours, and no more than the places asked can hold.
func checkNeighbours(q sdk.RecallQuery, hits []sdk.Hit, excluded func(string) bool) error {
	seen := map[string]bool{}
	since, until := q.WindowMillis()
	for i := range hits {
		h := &hits[i]
		if most := 2 * q.Neighbours * sdk.MaxPlaceRecords; q.Neighbours > 0 && len(h.Neighbours) > most {
			return badAnswer("recall", "hit %d has %d neighbours, more than the %d its places hold", i, len(h.Neighbours), most)
		}
		for j := range h.Neighbours {
			n := &h.Neighbours[j]
			var problem string
			switch {
			case q.Neighbours <= 0:
				problem = "was not asked for"
			case h.Record.Thread == nil:
				problem = "belongs to a hit in no thread"
			case sdk.ValidateID(n.ID) != nil:
				problem = "has no valid id"
			case n.Realm != q.Realm || n.Scope != h.Record.Scope:
				problem = "is a record of another realm or scope than its hit"
			case n.Thread == nil || n.Thread.ID != h.Record.Thread.ID || n.Thread.Seq < 0 || h.Record.Thread.Seq < 0 ||
				n.Thread.Seq == h.Record.Thread.Seq ||
				// Both seqs are at least 0 here: no difference overflows.
				max(n.Thread.Seq-h.Record.Thread.Seq, h.Record.Thread.Seq-n.Thread.Seq) > int64(q.Neighbours):
				problem = "is not beside its hit in its thread"
			case n.Status != sdk.StatusActive:
				problem = "is a record that is not active"
			case excluded(n.ID):
				problem = "is a record the query excluded"
			case (since != 0 || until != 0) && !inWindowMillis(n.When(), since, until):
				// Shown beside its hit, a neighbour is shown to the model:
				// the window holds it as it holds the hits.
				problem = "is a record outside the query's time window"
			case seen[n.ID] || n.ID == h.Record.ID:
				problem = "repeats a record of the answer"
			default:
				problem = recordShape(n)
			}
			if problem != "" {
				return badAnswer("recall", "neighbour %d of hit %d %s", j, i, problem)
			}
			seen[n.ID] = true
		}
	}
	return nil
}

// recordShape says how a record of an answer breaks the limits every
// stored record keeps ("" when it keeps them): its text and tags within
// the SDK's sizes, a use count within 0..MaxRecordUseCount, times
// within the years 1-9999, and a scope that parses. A record over them
// reached callers whole (a 31 MB body), one with a time JSON cannot hold
// failed the answer as the host's own error, and one whose scope came
// back padded or case-folded belonged to no identity the host's checks
// could name.
func recordShape(r *sdk.Record) string {
	switch {
	case r.Scope.Validate() != nil:
		return "has no valid scope"
	case len(r.Title) > sdk.MaxTitleBytes, len(r.Description) > sdk.MaxDescriptionBytes, len(r.Body) > sdk.MaxBodyBytes:
		return "has text over the record limits"
	case len(r.Tags) > sdk.MaxTags:
		return "has more tags than a record may"
	case r.UseCount < 0 || r.UseCount > sdk.MaxRecordUseCount:
		return "has a use count outside 0..MaxRecordUseCount"
	}
	for _, t := range r.Tags {
		if len(t) > sdk.MaxTagBytes {
			return "has a tag over the record limits"
		}
	}
	for _, t := range [...]time.Time{r.CreatedAt, r.UpdatedAt, r.ExpiresAt, r.LastUsedAt, r.OccurredAt} {
		if sdk.CheckTime("", t) != nil {
			return "has a time outside the years 1-9999"
		}
	}
	return ""
}

// checkRecords holds an answer of records (Get, Export) to its realm,
// and to the ids asked when asked is not nil.
func checkRecords(call, realm string, recs []sdk.Record, asked []string) error {
	wanted := memberOf(asked)
	for i := range recs {
		r := &recs[i]
		var problem string
		switch {
		case sdk.ValidateID(r.ID) != nil:
			problem = "has no valid id"
		case r.Realm != realm:
			problem = "is of another realm than the one asked"
		case asked != nil && !wanted(r.ID):
			problem = "is not one the call asked for"
		default:
			problem = recordShape(r)
		}
		if problem != "" {
			return badAnswer(call, "record %d %s", i, problem)
		}
	}
	return nil
}

// checkExportPage holds an export page to its realm, cursor and limit:
// safe ids in ascending order after the cursor, and a next cursor that is
// empty or an id past the cursor and the page's records. A cursor that
// does not move would have its callers ask for the same page until their
// deadline.
func checkExportPage(realm, after string, limit int, page sdk.ExportPage) error {
	if most := pageLimit(limit); len(page.Records) > most {
		return badAnswer("export", "%d records, over the limit %d", len(page.Records), most)
	}
	if err := checkRecords("export", realm, page.Records, nil); err != nil {
		return err
	}
	if err := checkAscending("export", after, len(page.Records), func(i int) string { return page.Records[i].ID }); err != nil {
		return err
	}
	switch {
	case page.Next == "":
	case sdk.ValidateID(page.Next) != nil:
		return badAnswer("export", "the next cursor is not a valid id")
	case page.Next <= after:
		return badAnswer("export", "the next cursor does not sort after the cursor asked with")
	case len(page.Records) > 0 && page.Next < page.Records[len(page.Records)-1].ID:
		return badAnswer("export", "the next cursor sorts before the page's last record")
	}
	return nil
}

// checkAscending holds the n ids of a page (id(i)) to id order: each
// sorting after the one before it, the first after the cursor ("" is
// before every id).
func checkAscending(call, after string, n int, id func(i int) string) error {
	for i := range n {
		prev := after
		if i > 0 {
			prev = id(i - 1)
		}
		if id(i) <= prev && (i > 0 || after != "") {
			if i == 0 {
				return badAnswer(call, "id 0 does not sort after the cursor asked with")
			}
			return badAnswer(call, "ids %d and %d are not in ascending order", i-1, i)
		}
	}
	return nil
}

// checkRows holds manifest rows from index first on to the asked scopes
// and to the limits of the records they list: safe ids, text within the
// SDK's sizes, times within the years 1-9999. A row over them (a title of
// a chunk's whole message) made the bound on a full manifest's rows none
// on its bytes, and a time JSON cannot hold failed the caller's answer as
// the host's own error.
func checkRows(q sdk.ManifestQuery, rows []sdk.ManifestRow, first int) error {
	for i := first; i < len(rows); i++ {
		r := &rows[i]
		var problem string
		switch {
		case sdk.ValidateID(r.ID) != nil:
			problem = "has no valid id"
		case r.Scope.Validate() != nil:
			problem = "has no valid scope"
		case len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope):
			problem = "is of a scope the query did not ask for"
		case math.IsNaN(r.Rank) || math.IsInf(r.Rank, 0):
			problem = "has a rank that is not a finite number"
		case len(r.Title) > sdk.MaxTitleBytes, len(r.Description) > sdk.MaxDescriptionBytes:
			problem = "has text over the record limits"
		case sdk.CheckTime("", r.UpdatedAt) != nil:
			problem = "has a time outside the years 1-9999"
		}
		if problem != "" {
			return badAnswer("manifest", "row %d %s", i, problem)
		}
	}
	return nil
}

// checkRowsOnce holds all the rows of a manifest to listing each record once.
func checkRowsOnce(rows []sdk.ManifestRow) error {
	if i, j := repeated(len(rows), func(i int) string { return rows[i].ID }); i >= 0 {
		return badAnswer("manifest", "rows %d and %d are the same record", j, i)
	}
	return nil
}

// checkIDs holds a list of ids a plugin answered: each safe, at most max
// (when max >= 0), each once.
func checkIDs(call string, ids []string, max int) error {
	if max >= 0 && len(ids) > max {
		return badAnswer(call, "%d ids, over the %d the call allows", len(ids), max)
	}
	for i, id := range ids {
		if sdk.ValidateID(id) != nil {
			return badAnswer(call, "id %d is not a valid id", i)
		}
	}
	if i, j := repeated(len(ids), func(i int) string { return ids[i] }); i >= 0 {
		return badAnswer(call, "ids %d and %d are the same", j, i)
	}
	return nil
}

// checkSelection holds a selector's answer to the request: only offered,
// unsuppressed ids, each once, at most Max when Max is set.
func checkSelection(req sdk.SelectRequest, ids []string) error {
	max := -1
	if req.Max > 0 {
		max = req.Max
	}
	if err := checkIDs("select", ids, max); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	offered := make(map[string]struct{}, len(req.Rows))
	for i := range req.Rows {
		offered[req.Rows[i].ID] = struct{}{}
	}
	suppressed := memberOf(req.SuppressedIDs)
	for i, id := range ids {
		if _, ok := offered[id]; !ok {
			return badAnswer("select", "id %d is not one of the rows offered", i)
		}
		if suppressed(id) {
			return badAnswer("select", "id %d is suppressed", i)
		}
	}
	return nil
}

// checkCount holds a count a plugin answered to 0..max.
func checkCount(call, what string, n, max int) error {
	if n < 0 || n > max {
		return badAnswer(call, "%d %s, outside 0..%d", n, what, max)
	}
	return nil
}

// memberOf answers a test of membership in list: a scan for a short
// list, a set for a long one.
func memberOf(list []string) func(string) bool {
	if len(list) <= 16 {
		return func(s string) bool { return slices.Contains(list, s) }
	}
	set := make(map[string]struct{}, len(list))
	for _, s := range list {
		set[s] = struct{}{}
	}
	return func(s string) bool {
		_, ok := set[s]
		return ok
	}
}

// repeated answers the indexes i > j of the first id that id(j) already
// gave, or -1, -1. Short lists are compared pairwise, without a map.
func repeated(n int, id func(int) string) (int, int) {
	if n <= 32 {
		for i := 1; i < n; i++ {
			for j := range i {
				if id(i) == id(j) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	seen := make(map[string]int, n)
	for i := range n {
		if j, ok := seen[id(i)]; ok {
			return i, j
		}
		seen[id(i)] = i
	}
	return -1, -1
}

// gRPC answers ResourceExhausted for a message over the size limit on
// either side, and the host's too_large reads it as the caller's mistake.
// But a request within the protocol's limit (wire.MaxMessageBytes, which
// every answer within the record limits fits) that still meets it means
// the plugin answered more than any answer may be, or receives less than
// the protocol requires: the plugin's fault, a bad answer. Only a request
// over the limit is the caller's too_large.
func oversizeUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if !overLimit(err) {
		return err
	}
	if m, ok := req.(proto.Message); ok && proto.Size(m) > wire.MaxMessageBytes {
		return err
	}
	return oversized(method, err)
}

// answerStream does the same for a stream: the host sends small chunks,
// so a message over the limit on a stream is always the plugin's. So is a
// message the plugin could not encode (a string of it not valid UTF-8),
// as utf8Interceptor tells for a unary call.
func answerStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return answerClientStream{ClientStream: s, method: method}, nil
}

type answerClientStream struct {
	grpc.ClientStream
	method string
}

func (s answerClientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case overLimit(err):
		return oversized(s.method, err)
	case unencodable(err):
		return badAnswer(path.Base(s.method), "a string of the answer is not valid UTF-8")
	}
	return err
}

// overLimit reports whether err is gRPC's refusal of a message over the
// size limit: ResourceExhausted without the storage_full detail a plugin
// sends for a full disk.
func overLimit(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == wire.ErrorDomain && info.Reason == wire.ReasonStorageFull {
			return false
		}
	}
	return true
}

func oversized(method string, err error) error {
	return badAnswer(strings.ToLower(path.Base(method)), "a message over the size limit though the request is within the protocol's %d bytes: the answer is too large, or the plugin receives less than the protocol requires (%s)",
		wire.MaxMessageBytes, status.Convert(err).Message())
}
