package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// The realms every check writes to. Realm B is the stranger: nothing
// written to realm A may ever be seen through it.
const (
	realmA = "conformance-a"
	realmB = "conformance-b"
)

// Scopes the checks spread records over.
var (
	scopeAlice = sdk.IdentityScope("alice")
	scopeBob   = sdk.IdentityScope("bob")
	scopeTeam  = sdk.MobScope("team")
)

// commonWord is in the body of every record the kit writes, so one query
// can list them all whatever the provider's ranking.
const commonWord = "conformance"

// listLimit is the recall limit for queries that list records; no check
// writes more matching records than this.
const listLimit = 100

// instance is one running plugin.
type instance struct {
	conn *host.Conn
	impl sdk.Plugin // in-process targets only
}

// close stops the plugin gracefully and, in-process, closes the plugin
// value the way sdk.Serve closes it when a binary shuts down.
func (i *instance) close() error {
	i.conn.Close()
	if c, ok := i.impl.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// refusesBadConfigs configures a fresh plugin with each config no plugin
// may accept: valid (the target's config, as an object) plus an unknown
// key, a JSON array, a JSON string, and every Target.BadConfigs entry. Each
// must be refused with sdk.ErrInvalid.
func (s *Suite) refusesBadConfigs(ctx context.Context, dir string, valid map[string]json.RawMessage) error {
	valid["conformance_unknown_key"] = json.RawMessage("true")
	unknown, err := json.Marshal(valid)
	if err != nil {
		return err
	}
	type badConfig struct {
		what   string
		config json.RawMessage
	}
	bad := []badConfig{
		{"an unknown key", unknown},
		{"a JSON array", json.RawMessage(`[]`)},
		{"a JSON string", json.RawMessage(`"memory.db"`)},
	}
	for i, c := range s.target.BadConfigs {
		bad = append(bad, badConfig{fmt.Sprintf("Target.BadConfigs[%d]", i), c})
	}
	var p problems
	for _, b := range bad {
		inst, err := s.launch(ctx, dir)
		if err != nil {
			return err
		}
		err = inst.conn.Configure(ctx, b.config)
		if cerr := inst.close(); cerr != nil {
			p.addf("Close after a refused Configure: %v", cerr)
		}
		p.add(wantErr(fmt.Sprintf("Configure with %s (%s)", b.what, b.config), err, sdk.ErrInvalid))
	}
	return p.err()
}

// launch starts the plugin without configuring it.
func (s *Suite) launch(ctx context.Context, dir string) (*instance, error) {
	if s.target.New != nil {
		impl := s.target.New()
		if impl == nil {
			return nil, errors.New("Target.New returned nil")
		}
		conn, err := host.ServeInProcess(ctx, impl, s.logger)
		if err != nil {
			if c, ok := impl.(io.Closer); ok {
				c.Close()
			}
			return nil, err
		}
		return &instance{conn: conn, impl: impl}, nil
	}
	conn, err := host.Launch(ctx, host.LaunchOptions{
		Name: s.name, Path: s.target.Binary, SHA256: s.checksum, Verifier: s.verifier, Dir: dir, Logger: s.logger,
		StartTimeout: s.target.StartTimeout, Interpreted: s.interpreted,
	})
	if err != nil {
		return nil, err
	}
	return &instance{conn: conn}, nil
}

// config answers the target's configuration for dir.
func (s *Suite) config(dir string) json.RawMessage {
	if s.target.Config == nil {
		return json.RawMessage("{}")
	}
	return s.target.Config(dir)
}

// env is one check's world: a data directory and the plugin running on it.
type env struct {
	suite *Suite
	dir   string
	inst  *instance
	p     *Client
	words int
}

// open starts and configures the plugin on the data directory.
func (e *env) open(ctx context.Context) error {
	inst, err := e.suite.launch(ctx, e.dir)
	if err != nil {
		return err
	}
	if err := inst.conn.Configure(ctx, e.suite.config(e.dir)); err != nil {
		inst.close()
		return fmt.Errorf("configure with the target's config for %q: %w", e.dir, err)
	}
	p, err := ClientOf(inst.conn)
	if err != nil {
		inst.close()
		return err
	}
	e.inst, e.p = inst, p
	return nil
}

// close stops the plugin, if one is running.
func (e *env) close() error {
	if e.inst == nil {
		return nil
	}
	err := e.inst.close()
	e.inst, e.p = nil, nil
	if err != nil {
		return fmt.Errorf("closing the plugin: %w", err)
	}
	return nil
}

// restart stops the plugin cleanly and starts a new one on the same data.
func (e *env) restart(ctx context.Context) error {
	if err := e.close(); err != nil {
		return err
	}
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// has reports whether the plugin declares capability c.
func (e *env) has(c sdk.Capability) bool { return e.suite.info.Capabilities.Has(c) }

// word answers a term no other record of the check holds. It is made of
// consonants only, so no stemmer or stopword list alters it, and all such
// words have one length, so none is a substring of another.
func (e *env) word() string {
	const letters = "bcdfghjkmnpqrtvwxz"
	n := e.words
	e.words++
	b := []byte("zq")
	for range 6 {
		b = append(b, letters[n%len(letters)])
		n /= len(letters)
	}
	return string(b)
}

// record answers a valid record in scope and the word only it holds, in
// both its title and its body.
func (e *env) record(scope sdk.Scope) (sdk.Record, string) {
	w := e.word()
	return sdk.Record{
		Scope: scope,
		Kind:  sdk.KindFact,
		Title: "Note " + w,
		Body:  "The " + w + " record, written by the " + commonWord + " kit.",
	}, w
}

// remember writes records and checks the answer's shape.
func (e *env) remember(ctx context.Context, realm string, recs ...sdk.Record) ([]string, error) {
	ids, err := e.p.Remember(ctx, realm, recs)
	if err != nil {
		return nil, fmt.Errorf("Remember(%s, %d records): %w", realm, len(recs), err)
	}
	if len(ids) != len(recs) {
		return nil, fmt.Errorf("Remember(%s, %d records) answered %d ids, want one per record", realm, len(recs), len(ids))
	}
	for _, id := range ids {
		if err := sdk.ValidateID(id); err != nil {
			return nil, fmt.Errorf("Remember(%s) answered an unsafe id: %w", realm, err)
		}
	}
	return ids, nil
}

// recall runs q and checks what every answer must satisfy: hits in the
// asked realm and scopes, recallable, no duplicates, no excluded ids,
// at most the limit, best first.
func (e *env) recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	hits, err := e.p.Recall(ctx, q)
	what := fmt.Sprintf("Recall(realm %s, query %q, scopes %v)", q.Realm, q.Query, q.Scopes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	limit := q.Limit
	if limit == 0 {
		limit = sdk.DefaultRecallLimit
	}
	if len(hits) > limit {
		return nil, fmt.Errorf("%s answered %d hits, over the limit %d", what, len(hits), limit)
	}
	seen := map[string]bool{}
	now := time.Now()
	for i, h := range hits {
		r := h.Record
		switch {
		case r.Realm != q.Realm:
			return nil, fmt.Errorf("%s answered record %s of realm %q", what, r.ID, r.Realm)
		case len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope):
			return nil, fmt.Errorf("%s answered record %s of scope %q", what, r.ID, r.Scope)
		case !r.Recallable(now):
			return nil, fmt.Errorf("%s answered record %s that is not recallable (status %q, expires %v)", what, r.ID, r.Status, r.ExpiresAt)
		case seen[r.ID]:
			return nil, fmt.Errorf("%s answered record %s twice", what, r.ID)
		case slices.Contains(q.ExcludeIDs, r.ID):
			return nil, fmt.Errorf("%s answered excluded record %s", what, r.ID)
		case i > 0 && h.Score > hits[i-1].Score:
			return nil, fmt.Errorf("%s is not ordered best first: hit %d scores %v, hit %d scores %v", what, i-1, hits[i-1].Score, i, h.Score)
		}
		seen[r.ID] = true
	}
	return hits, nil
}

// recallIDs answers the ids recalled for query in realm and scopes.
func (e *env) recallIDs(ctx context.Context, realm, query string, scopes ...sdk.Scope) ([]string, error) {
	hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realm, Query: query, Scopes: scopes, Limit: listLimit})
	if err != nil {
		return nil, err
	}
	return hitIDs(hits), nil
}

// fullManifest lists the full tier of realm's manifest for scopes.
func (e *env) fullManifest(ctx context.Context, realm string, scopes ...sdk.Scope) ([]sdk.ManifestRow, error) {
	rows, err := e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Scopes: scopes, Tier: sdk.TierFull})
	if err != nil {
		return nil, fmt.Errorf("Manifest(realm %s, full, scopes %v): %w", realm, scopes, err)
	}
	return rows, nil
}

// stored answers whether the record holding word (in its title) is stored
// in realm, looking as far as the plugin lets the kit look: by recall of
// the word, and in the full manifest when the plugin has one.
func (e *env) stored(ctx context.Context, realm, word string) (bool, error) {
	hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realm, Query: word, Limit: listLimit})
	if err != nil {
		return false, err
	}
	for _, h := range hits {
		if strings.Contains(h.Record.Title, word) || strings.Contains(h.Record.Body, word) {
			return true, nil
		}
	}
	if e.has(sdk.CapManifest) {
		rows, err := e.fullManifest(ctx, realm)
		if err != nil {
			return false, err
		}
		for _, r := range rows {
			if strings.Contains(r.Title, word) {
				return true, nil
			}
		}
	}
	return false, nil
}

// getOne fetches one record by id; found is false when it is not there.
func (e *env) getOne(ctx context.Context, realm, id string) (rec sdk.Record, found bool, err error) {
	recs, err := e.p.Get(ctx, realm, []string{id})
	if err != nil {
		return sdk.Record{}, false, fmt.Errorf("Get(%s, %s): %w", realm, id, err)
	}
	switch len(recs) {
	case 0:
		return sdk.Record{}, false, nil
	case 1:
		if recs[0].ID != id {
			return sdk.Record{}, false, fmt.Errorf("Get(%s, %s) answered record %s", realm, id, recs[0].ID)
		}
		return recs[0], true, nil
	}
	return sdk.Record{}, false, fmt.Errorf("Get(%s, %s) answered %d records", realm, id, len(recs))
}

func hitIDs(hits []sdk.Hit) []string {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Record.ID
	}
	return ids
}

func rowIDs(rows []sdk.ManifestRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// sameSet reports whether a and b hold the same strings, ignoring order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// wantErr checks that err wraps sentinel.
func wantErr(what string, err, sentinel error) error {
	if err == nil {
		return fmt.Errorf("%s succeeded, want an error wrapping %s", what, sentinelName(sentinel))
	}
	if !errors.Is(err, sentinel) {
		return fmt.Errorf("%s: error %q does not wrap %s (its code is %s)", what, err, sentinelName(sentinel), sdk.CodeOf(err))
	}
	return nil
}

func sentinelName(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{sdk.ErrInvalid, "sdk.ErrInvalid"}, {sdk.ErrNotFound, "sdk.ErrNotFound"}, {sdk.ErrConflict, "sdk.ErrConflict"},
		{sdk.ErrTooLarge, "sdk.ErrTooLarge"}, {sdk.ErrUnsupported, "sdk.ErrUnsupported"}, {sdk.ErrUnavailable, "sdk.ErrUnavailable"},
		{sdk.ErrDeadline, "sdk.ErrDeadline"}, {sdk.ErrPermission, "sdk.ErrPermission"},
	} {
		if s.err == err {
			return s.name
		}
	}
	return err.Error()
}

// problems collects every failure of a check that can go on after one.
type problems []error

func (p *problems) add(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func (p problems) err() error { return errors.Join(p...) }

// fill answers a text of exactly n bytes that starts with prefix, made of
// words and ending in a letter (so no provider trims it).
func fill(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len() < n {
		b.WriteString(" lorem")
	}
	s := b.String()[:n]
	if strings.HasSuffix(s, " ") {
		s = s[:n-1] + "x"
	}
	return s
}
