package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Record listing page sizes, and how many records one listing request
// may read looking for matches (a bound token's hidden ones counted: the
// cursor it is given is sealed instead).
const (
	DefaultRecordPage = 50
	MaxRecordPage     = 200
	maxListScan       = 20_000
)

// recordFilter is what a record listing keeps.
type recordFilter struct {
	scope  sdk.Scope
	kind   sdk.RecordKind
	tag    string
	status sdk.Status
	trust  sdk.Trust
	since  time.Time
}

func parseRecordFilter(q url.Values) (recordFilter, error) {
	f := recordFilter{
		scope: sdk.Scope(q.Get("scope")), kind: sdk.RecordKind(q.Get("kind")), tag: q.Get("tag"),
		status: sdk.Status(q.Get("status")), trust: sdk.Trust(q.Get("trust")),
	}
	if f.scope != "" {
		if err := f.scope.Validate(); err != nil {
			return f, err
		}
	}
	// A value no record can hold is refused rather than answered with an
	// empty list, as if nothing matched (?status=activ). The record rules
	// name the refused parameter: kind, trust or status.
	probe := sdk.Record{Scope: sdk.RealmScope, Kind: f.kind, Trust: f.trust, Status: f.status, Title: "filter"}
	if probe.Kind == "" {
		probe.Kind = sdk.KindFact
	}
	if err := probe.Validate(); err != nil {
		return f, err
	}
	if f.tag != "" {
		if err := sdk.ValidateTagFilter("tag", []string{f.tag}); err != nil {
			return f, asField("tag", err)
		}
	}
	if v := q.Get("since"); v != "" {
		t, err := queryTime("since", v)
		if err != nil {
			return f, err
		}
		f.since = t
	}
	return f, nil
}

func (f recordFilter) keep(r *sdk.Record) bool {
	return (f.scope == "" || r.Scope == f.scope) && (f.kind == "" || r.Kind == f.kind) &&
		(f.tag == "" || r.HasTag(f.tag)) && (f.status == "" || r.Status == f.status) &&
		(f.trust == "" || r.Trust == f.trust) && (f.since.IsZero() || !r.UpdatedAt.Before(f.since))
}

// handleListRecords lists a realm's records (application callers only;
// a bound token sees no other identity's own scope):
// with q, the provider's own recall over the scope (active records, best
// first, with scores); without, every status in id order from the
// archive, a page at a time.
func (s *Server) handleListRecords(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("list records"); err != nil {
		return err
	}
	q := r.URL.Query()
	realm, p, err := s.provider(c, q.Get("realm"))
	if err != nil {
		return err
	}
	f, err := parseRecordFilter(q)
	if err != nil {
		return err
	}
	// A bound token lists no record it could not read by id (identity.go).
	view, err := s.readView(ctx, c, realm)
	if err != nil {
		return err
	}
	if f.scope != "" {
		if err := view.checkScope(f.scope); err != nil {
			return err
		}
	}
	limit, err := pageLimit(q.Get("limit"), DefaultRecordPage, MaxRecordPage)
	if err != nil {
		return err
	}
	// A search is one ranked answer with no next page: an after it would
	// ignore would answer a client paging it the same first page forever.
	if q.Get("q") != "" && q.Get("after") != "" {
		return &sdk.FieldError{Field: "after", Problem: "a search (q) answers its best matches in one page; leave after out, or raise limit", Err: sdk.ErrInvalid}
	}
	// A search is the provider's recall, which holds active records only:
	// another status would answer an empty page, as if nothing matched.
	if q.Get("q") != "" && f.status != "" && f.status != sdk.StatusActive {
		return &sdk.FieldError{Field: "status", Problem: "a search (q) finds active records only; leave status out, or leave q out to list " + string(f.status) + " records", Err: sdk.ErrInvalid}
	}
	type item struct {
		Record sdk.Record `json:"record"`
		Score  float64    `json:"score,omitempty"`
	}
	out := []item{}
	next := ""
	if query := q.Get("q"); query != "" {
		rq := sdk.RecallQuery{Realm: realm, Query: query, Limit: MaxRecallLimit}
		if f.scope != "" {
			rq.Scopes = []sdk.Scope{f.scope}
		}
		if f.tag != "" {
			rq.Tags = []string{f.tag}
		}
		// The filters apply before the recall's limit, as hidden scopes
		// do: applied after, a kind or trust the best 100 matches lack
		// answered nothing however many of its records matched.
		hits, err := view.search(ctx, p, rq, f.keep, limit)
		if err != nil {
			return err
		}
		for _, h := range hits {
			if len(out) < limit {
				out = append(out, item{Record: h.Record, Score: h.Score})
			}
		}
	} else {
		a, ok := host.ProviderOf(p).Archiver()
		if !ok {
			return fmt.Errorf("the provider of realm %q cannot list its records (it lacks the archive capability): %w", realm, sdk.ErrUnsupported)
		}
		after := q.Get("after")
		if strings.HasPrefix(after, sealedCursorPrefix) {
			if after, err = s.cursors.open(realm, after); err != nil {
				return &sdk.FieldError{Field: "after", Problem: err.Error(), Err: sdk.ErrInvalid}
			}
		} else if after != "" {
			if err := sdk.ValidateID(after); err != nil {
				return asField("after", err)
			}
		}
		lastHidden := false
		for scanned := 0; len(out) < limit && scanned < maxListScan; {
			if err := ctx.Err(); err != nil {
				return err
			}
			page, err := a.Export(ctx, realm, after, sdk.MaxExportPage)
			if err != nil {
				return err
			}
			// An empty page counts as a full one: a plugin answering
			// empty pages with a cursor that moves is held to the pages
			// an honest scan would take.
			if len(page.Records) == 0 {
				scanned += sdk.MaxExportPage
			}
			if len(page.Records) == 0 && page.Next != "" {
				after = page.Next
				lastHidden = true // the provider's cursor: no record read
				continue
			}
			for _, rec := range page.Records {
				after = rec.ID
				scanned++
				lastHidden = view.hides(rec.Scope)
				if f.keep(&rec) && !lastHidden {
					out = append(out, item{Record: rec})
				}
				if len(out) == limit || scanned >= maxListScan {
					break
				}
			}
			// The end, unless a bound token's page is full: its own last
			// record being the realm's last would tell it that no one
			// else's record comes after (none written since, ids growing
			// with time). Its next page tells the end instead.
			full := len(out) == limit && view.c.bound()
			if page.Next == "" && (len(page.Records) == 0 || after == page.Records[len(page.Records)-1].ID) && !full {
				after = ""
				break
			}
		}
		next = after
		// A read stopped at a record the token may not read: its id
		// would name another identity's record and, moved past a guessed
		// id, tell whether it exists. The cursor holds it sealed, as it
		// does every bound token's, so a cursor's form tells nothing.
		if next != "" && (lastHidden || view.c.bound()) {
			next = s.cursors.seal(realm, next)
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "records": out, "next": next})
}

// search answers the hits of q that the caller may read and keep
// keeps, best first. For a bound token the provider ranks other
// identities' records too; asking again without them, until an answer
// holds none or want of the rest, keeps them from crowding the token's own
// records out of the limit (and from showing, by what is missing, how many
// of theirs match); so for the records keep leaves out. It stops with
// what it has once the ids left out reach a provider call's bound.
func (v readView) search(ctx context.Context, p sdk.Provider, q sdk.RecallQuery, keep func(*sdk.Record) bool, want int) ([]sdk.Hit, error) {
	for {
		hits, err := p.Recall(ctx, q)
		if err != nil {
			return nil, err
		}
		readable := hits[:0:0]
		foreign := 0
		for _, h := range hits {
			// Another realm's record, from a provider that ignores its
			// query's realm, is no more the caller's than a hidden scope's
			// (as POST /v1/recall holds it).
			if (h.Record.Realm == "" || h.Record.Realm == q.Realm) && !v.hides(h.Record.Scope) && keep(&h.Record) {
				readable = append(readable, h)
			} else if len(q.ExcludeIDs) < sdk.MaxBatch {
				q.ExcludeIDs = append(q.ExcludeIDs, h.Record.ID)
				foreign++
			}
		}
		// Every hit left out ranked above the rest, so the first want
		// kept are the best want of all.
		if foreign == 0 || len(hits) < q.Limit || len(readable) >= want {
			return readable, nil
		}
	}
}
