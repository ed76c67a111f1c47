package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
	"github.com/memhost/memhost/sdk/strictjson"
)

// The archive endpoints dump and load a realm's full records (ids, times,
// status, counters), so they are an application caller's alone: an agent
// could otherwise forge history or read every identity's records.

type exportRequest struct {
	Realm string `json:"realm"`
	After string `json:"after"`
	Limit int    `json:"limit"`
}

type exportResponse struct {
	Records []sdk.Record `json:"records"`
	Next    string       `json:"next"`
}

// archiver resolves the realm and its provider, requires an application
// caller and a provider that declares the archive capability.
func (s *Server) archiver(c caller, realmName string) (string, sdk.Provider, sdk.Archiver, error) {
	if err := c.requireApplication("export or import"); err != nil {
		return "", nil, nil, err
	}
	if err := c.requireRealmWide("export and import"); err != nil {
		return "", nil, nil, err
	}
	realm, p, err := s.provider(c, realmName)
	if err != nil {
		return "", nil, nil, err
	}
	a, ok := host.ProviderOf(p).Archiver()
	if !ok {
		return "", nil, nil, fmt.Errorf("the provider of realm %q cannot export or import records: %w", realm, sdk.ErrUnsupported)
	}
	return realm, p, a, nil
}

func (s *Server) handleExport(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req exportRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	realm, _, a, err := s.archiver(c, req.Realm)
	if err != nil {
		return err
	}
	if req.Limit < 0 || req.Limit > sdk.MaxExportPage {
		return fieldRefusal("limit", sdk.ErrInvalid, "%d is outside 0..%d", req.Limit, sdk.MaxExportPage)
	}
	if req.Limit == 0 {
		req.Limit = sdk.MaxExportPage
	}
	if req.After != "" {
		if err := sdk.ValidateID(req.After); err != nil {
			return asField("after", err)
		}
	}
	page, err := a.Export(ctx, realm, req.After, req.Limit)
	if err != nil {
		return err
	}
	if page.Records == nil {
		page.Records = []sdk.Record{}
	}
	return writeJSON(w, http.StatusOK, exportResponse{Records: page.Records, Next: page.Next})
}

type importRequest struct {
	Realm   string       `json:"realm"`
	Records []sdk.Record `json:"records"`
}

func (s *Server) handleImport(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req importRequest
	data, err := s.decodeBody(w, r, &req)
	if err != nil {
		return err
	}
	// The record's times as sent: decoded into the record, the zero
	// instant would read as absent (an expiry of year 1 kept as none).
	var sent struct {
		Records []struct {
			coordinator.RecordTimes
			// A thread's seq as sent: left out, it would read as 0.
			Thread *threadInput `json:"thread"`
		} `json:"records"`
	}
	if _, err := strictjson.DecodeTolerant(data, &sent); err != nil {
		return invalidJSON("request body", err)
	}
	realm, p, a, err := s.archiver(c, req.Realm)
	if err != nil {
		return err
	}
	// An empty list imports nothing; a missing one is a client's mistake.
	if req.Records == nil {
		return required("records")
	}
	if len(req.Records) > sdk.MaxBatch {
		return fieldRefusal("records", sdk.ErrTooLarge, "%d records, the limit per request is %d", len(req.Records), sdk.MaxBatch)
	}
	// Checked here so a bad batch is refused before any plugin call, with
	// the index of the offending record.
	first := make(map[string]int, len(req.Records))
	prepared := make([]sdk.Record, len(req.Records))
	for i := range req.Records {
		if i < len(sent.Records) {
			if err := sent.Records[i].Check(); err != nil {
				return inRecord(i, err)
			}
			if err := sent.Records[i].Thread.check(); err != nil {
				return inRecord(i, err)
			}
		}
		probe := req.Records[i]
		if err := probe.PrepareImport(realm); err != nil {
			return inRecord(i, err)
		}
		if err := checkImportTimes(&probe); err != nil {
			return inRecord(i, err)
		}

		// A provider skips an id it holds, so the second record of an id
		// would be dropped unseen, counted as skipped.
		if j, ok := first[probe.ID]; ok {
			return inRecord(i, &sdk.FieldError{Field: "id", Problem: fmt.Sprintf("%q is records[%d]'s id too; an import holds each id once", probe.ID, j), Err: sdk.ErrInvalid})
		}
		first[probe.ID] = i
		prepared[i] = probe
	}
	conflicts, retiring, err := idConflicts(ctx, realm, p, prepared)
	if err != nil {
		return err
	}
	records := req.Records
	if len(conflicts) > 0 {
		records = make([]sdk.Record, 0, len(req.Records)-len(conflicts))
		for i, r := range req.Records {
			if !slices.ContainsFunc(conflicts, func(c importConflict) bool { return c.Index == i }) {
				records = append(records, r)
			}
		}
	}
	var res sdk.ImportResult
	switch {
	case len(records) == 0:
	case s.opts.Proposals == nil:
		res, err = a.Import(ctx, realm, records)
	default:
		// Through the queue, as a write goes (restateProposals): an agent
		// must not keep a shared record out of recall by proposing it first.
		res, err = s.opts.Proposals.Import(ctx, realm, p, records)
	}
	if err != nil {
		return err
	}
	if s.opts.Proposals != nil && len(records) > 0 {
		if err := s.opts.Proposals.NoteImported(ctx, realm, p, records); err != nil {
			// The records are stored; a rerun of the import notes them.
			return fmt.Errorf("the records are stored, but noting their pending proposals for review failed (run the import again): %w", err)
		}
	}
	retired, err := retiredBy(ctx, realm, p, prepared, retiring)
	if err != nil {
		return fmt.Errorf("the records are stored, but reading back the ones they retired failed: %w", err)
	}
	// The store counts a record it retired as imported.
	retired = min(retired, res.Imported)
	res.Imported -= retired
	return writeJSON(w, http.StatusOK, importAnswer{ImportResult: res, Retired: retired, Conflicts: conflicts})
}

// retiredBy counts the stored records of retiring (indexes into records)
// that now hold their imported record's status: those the store moved on
// (sdk.ImportRetires). A store that skips them, as stores did, moved none.
func retiredBy(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, retiring []int) (int, error) {
	if len(retiring) == 0 {
		return 0, nil
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return 0, nil
	}
	want := make(map[string]sdk.Status, len(retiring))
	ids := make([]string, len(retiring))
	for i, at := range retiring {
		ids[i] = records[at].ID
		want[ids[i]] = records[at].Status
	}
	stored, err := getter.Get(ctx, realm, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range stored {
		if st, ok := want[r.ID]; ok && r.Status == st {
			n++
			delete(want, r.ID)
		}
	}
	return n, nil
}

// importAnswer is POST /v1/import's answer: the store's counts, and the
// records not imported because their id names another record.
type importAnswer struct {
	sdk.ImportResult
	// Retired counts the stored records moved on to the later status an
	// import gave them (sdk.ImportRetires), neither imported nor skipped.
	Retired   int              `json:"retired,omitempty"`
	Conflicts []importConflict `json:"conflicts,omitempty"`
}

// importConflict is a record of an import whose id the store gives
// another record.
type importConflict struct {
	Index int    `json:"index"` // in the request's records
	ID    string `json:"id"`
}

// idConflicts finds the records of an import whose id the realm's store
// gives another record: other content (a record edited since the backup,
// by hand in a markdown file, say) or another scope. A store skips an id
// it holds, so such a record was dropped and counted "already stored", as
// if the import had been run before; it is left out and answered apart,
// the rest of the batch imported. The same record again (a resumed
// import) is no conflict; nor is a newer export of it, retired since
// (sdk.ImportRetires), whose index is answered apart. A provider that
// cannot fetch by id is left to skip as it does.
func idConflicts(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) ([]importConflict, []int, error) {
	getter, ok := host.ProviderOf(p).Getter()
	if !ok || len(records) == 0 {
		return nil, nil, nil
	}
	ids := make([]string, len(records))
	at := make(map[string]int, len(records))
	for i, r := range records {
		ids[i], at[r.ID] = r.ID, i
	}
	stored, err := getter.Get(ctx, realm, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("checking the records' ids against the store: %w", err)
	}
	var out []importConflict
	var retiring []int
	for _, old := range stored {
		i, ok := at[old.ID]
		if !ok {
			continue
		}
		// The hash of what the store holds, not the one it answered: a
		// store need not keep the field.
		old.ContentHash = sdk.ContentHash(old.Title, old.Body)
		if r := records[i]; old.ContentHash != r.ContentHash || old.Scope != r.Scope {
			out = append(out, importConflict{Index: i, ID: r.ID})
		} else if sdk.ImportRetires(&old, &r) {
			retiring = append(retiring, i)
		}
	}
	slices.SortFunc(out, func(a, b importConflict) int { return a.Index - b.Index })
	return out, retiring, nil
}

// checkImportTimes refuses a record time past the years 1-9999 in UTC,
// where the record keeps it (PrepareImport checks occurred_at alone): a
// time with no JSON form would make every answer holding the record fail.
func checkImportTimes(r *sdk.Record) error {
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"created_at", r.CreatedAt}, {"updated_at", r.UpdatedAt}, {"expires_at", r.ExpiresAt}, {"last_used_at", r.LastUsedAt}} {
		if err := sdk.CheckTime(f.name, f.t); err != nil {
			return err
		}
	}
	return nil
}
