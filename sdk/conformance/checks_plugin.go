package conformance

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// checkInfo: Info is well formed, declares the provider kind and only
// known capabilities, and does not change between starts.
func checkInfo(_ context.Context, e *env) error {
	info := e.inst.conn.Info()
	var p problems
	if err := host.CheckInfo(info); err != nil {
		p.addf("the host refuses this Info: %v", err)
	}
	if !slices.Contains(info.Kinds, sdk.KindProvider) {
		p.addf("Info.Kinds %v does not include %q", info.Kinds, sdk.KindProvider)
	}
	for i, k := range info.Kinds {
		if !k.Known() {
			p.addf("Info.Kinds names unknown kind %q", k)
		}
		if slices.Contains(info.Kinds[:i], k) {
			p.addf("Info.Kinds lists %q twice", k)
		}
	}
	for i, c := range info.Capabilities {
		if !slices.Contains(knownCapabilities, c) {
			p.addf("Info.Capabilities names unknown capability %q (protocol v1 knows %v)", c, knownCapabilities)
		}
		if slices.Contains(info.Capabilities[:i], c) {
			p.addf("Info.Capabilities lists %q twice", c)
		}
	}
	if len(info.ConfigSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil || schema == nil {
			p.addf("Info.ConfigSchema is not a JSON object (a JSON Schema): %s", info.ConfigSchema)
		}
	}
	first := e.suite.info
	if info.Name != first.Name || info.Version != first.Version || !slices.Equal(info.Kinds, first.Kinds) ||
		!slices.Equal(info.Protocols, first.Protocols) || !slices.Equal(info.Capabilities, first.Capabilities) ||
		!bytes.Equal(info.ConfigSchema, first.ConfigSchema) {
		p.addf("Info changed between two starts: %+v, then %+v; it must not depend on anything", first, info)
	}
	return p.err()
}

// checkManifest: the plugin manifest parses, agrees with Info (the host
// refuses the plugin otherwise) and, for a binary, names it and its sha256.
func checkManifest(_ context.Context, e *env) error {
	path := e.suite.target.Manifest
	if !strings.HasSuffix(path, host.ManifestSuffix) {
		return fmt.Errorf("manifest %s: the host only reads files named <name>%s", path, host.ManifestSuffix)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	m, err := host.ParseManifest(data)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	var p problems
	info := e.suite.info
	if d := m.Mismatch(info); d != "" {
		p.addf("manifest %s disagrees with the plugin's Info (the host refuses it): %s", path, d)
	}
	if len(m.ConfigSchema) > 0 && !jsonEqual(m.ConfigSchema, info.ConfigSchema) {
		p.addf("manifest %s: config_schema differs from the plugin's Info.ConfigSchema", path)
	}
	if bin := e.suite.target.Binary; bin != "" {
		// The host runs the executable the manifest names from the
		// manifest's directory: a binary beside it, or a script inside its
		// tree ("mypy/main.py").
		named, _ := filepath.Abs(filepath.Join(filepath.Dir(path), filepath.FromSlash(m.Executable)))
		if m.Executable != filepath.Base(bin) && named != bin {
			p.addf("manifest %s: executable %q names %s, but the plugin under test is %s", path, m.Executable, named, bin)
		}
		if !bytes.Equal(m.Checksum(), e.suite.checksum) {
			p.addf("manifest %s: sha256 %s, but %s hashes to %s (regenerate the manifest after every build)",
				path, m.SHA256, bin, hex.EncodeToString(e.suite.checksum))
		}
	}
	return p.err()
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// checkUndeclared: the host reads the capabilities Info declares, and
// every one it does not declare answers sdk.ErrUnsupported through the
// host's client, and nothing happens.
func checkUndeclared(ctx context.Context, e *env) error {
	rec, _ := e.record(scopeAlice)
	calls := map[sdk.Capability]func() error{
		sdk.CapWrite: func() error { _, err := e.p.Remember(ctx, realmA, []sdk.Record{rec}); return err },
		sdk.CapFetch: func() error { _, err := e.p.Get(ctx, realmA, []string{"conformance-id"}); return err },
		sdk.CapForget: func() error {
			_, err := e.p.Forget(ctx, realmA, []string{"conformance-id"})
			return err
		},
		sdk.CapManifest: func() error {
			_, err := e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realmA, Tier: sdk.TierFull})
			return err
		},
		sdk.CapSupersede: func() error { _, err := e.p.Supersede(ctx, realmA, "conformance-id", rec); return err },
		sdk.CapUsage:     func() error { return e.p.MarkUsed(ctx, realmA, []string{"conformance-id"}, time.Now()) },
		sdk.CapLedger: func() error {
			return e.p.WriteLedger(ctx, []sdk.LedgerEntry{{Realm: realmA, Identity: "alice", RecordID: "conformance-id", Surface: "turn", At: time.Now()}})
		},
		sdk.CapArchive: func() error { _, err := e.p.Export(ctx, realmA, "", 1); return err },
		sdk.CapReindex: func() error { _, err := e.p.Reindex(ctx, realmA, nil); return err },
		sdk.CapVectors: func() error { _, err := e.p.MissingVectors(ctx, realmA, "conformance-model", "", 1); return err },
		sdk.CapUsageCounts: func() error {
			return e.p.CountUses(ctx, realmA, []sdk.Use{{ID: "conformance-id", Count: 2}}, time.Now())
		},
	}
	// A capability that rides on Recall is ignored when undeclared, not
	// refused: the host does not send it, and the answer holds none of it.
	ignored := map[sdk.Capability]func() error{
		sdk.CapNeighbours: func() error { return undeclaredNeighbours(ctx, e) },
	}
	var p problems
	if got := e.p.Capabilities(); !slices.Equal(got, e.suite.info.Capabilities) {
		p.addf("the host reads declared capabilities %v, Info declares %v", got, e.suite.info.Capabilities)
	}
	for _, c := range knownCapabilities {
		if e.has(c) {
			continue
		}
		if call, ok := ignored[c]; ok {
			p.add(call())
			continue
		}
		call, ok := calls[c]
		if !ok {
			p.addf("this kit has no call to try for capability %s; update the SDK", c)
			continue
		}
		p.add(wantErr(fmt.Sprintf("undeclared capability %s", c), call(), sdk.ErrUnsupported))
	}
	return p.err()
}

// undeclaredNeighbours: a recall asking for neighbours of a provider that
// did not declare them succeeds and answers none, beside hits in a thread
// too when the provider can store one.
func undeclaredNeighbours(ctx context.Context, e *env) error {
	query := commonWord
	if e.has(sdk.CapWrite) {
		var recs []sdk.Record
		for seq := range 3 {
			r, w := e.record(scopeAlice)
			r.Thread = &sdk.Thread{ID: "conformance undeclared neighbours", Seq: int64(seq)}
			recs = append(recs, r)
			if seq == 1 {
				query = w
			}
		}
		if _, err := e.remember(ctx, realmA, recs...); err != nil {
			return err
		}
	}
	hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: query, Limit: listLimit, Neighbours: 1})
	if err != nil {
		return fmt.Errorf("undeclared capability %s: a recall asking for neighbours must be answered without them: %w", sdk.CapNeighbours, err)
	}
	for i, h := range hits {
		if len(h.Neighbours) > 0 {
			return fmt.Errorf("undeclared capability %s: Recall(%q) answered %d neighbours beside hit %d", sdk.CapNeighbours, query, len(h.Neighbours), i)
		}
	}
	return nil
}

// checkConfig: the target's config is accepted; an unknown key, a
// non-object and every Target.BadConfigs entry are refused with
// sdk.ErrInvalid, each by a fresh plugin.
func checkConfig(ctx context.Context, e *env) error {
	valid := e.suite.config(e.dir)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(valid, &obj); err != nil || obj == nil {
		return fmt.Errorf("Target.Config must answer a JSON object, got %s", valid)
	}
	if err := e.open(ctx); err != nil {
		return err
	}
	if err := e.close(); err != nil {
		return err
	}
	return e.suite.refusesBadConfigs(ctx, e.dir, obj)
}

// checkBadRequests: malformed realms, scopes, ids and tiers in every call
// the plugin declares are refused with sdk.ErrInvalid, or for an id that
// cannot exist, answered as not found; nothing crashes.
func checkBadRequests(ctx context.Context, e *env) error {
	const badRealm = "../escape"
	const badID = "../../etc/passwd"
	var p problems
	_, err := e.p.Recall(ctx, sdk.RecallQuery{Realm: badRealm, Query: commonWord})
	p.add(wantErr("Recall in realm "+badRealm, err, sdk.ErrInvalid))
	for _, s := range []sdk.Scope{"bogus", "team:x", "identity:../x", "identity:"} {
		_, err = e.p.Recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord, Scopes: []sdk.Scope{s}})
		p.add(wantErr(fmt.Sprintf("Recall with scope %q", s), err, sdk.ErrInvalid))
	}
	_, err = e.p.Recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord, Limit: -1})
	p.add(wantErr("Recall with limit -1", err, sdk.ErrInvalid))
	tooMany := make([]string, sdk.MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("conformance-id-%d", i)
	}
	if e.has(sdk.CapFetch) {
		_, err = e.p.Get(ctx, badRealm, []string{"conformance-id"})
		p.add(wantErr("Get in realm "+badRealm, err, sdk.ErrInvalid))
		_, err = e.p.Get(ctx, realmA, tooMany)
		p.add(wantErr(fmt.Sprintf("Get of %d ids (the batch limit is %d)", len(tooMany), sdk.MaxBatch), err, sdk.ErrTooLarge))
		recs, err := e.p.Get(ctx, realmA, []string{badID})
		if err == nil && len(recs) > 0 {
			p.addf("Get(%q) answered %d records", badID, len(recs))
		} else if err != nil && !errors.Is(err, sdk.ErrInvalid) {
			p.addf("Get(%q): error %q is neither sdk.ErrInvalid nor an empty answer", badID, err)
		}
	}
	if e.has(sdk.CapForget) {
		_, err = e.p.Forget(ctx, badRealm, []string{"conformance-id"})
		p.add(wantErr("Forget in realm "+badRealm, err, sdk.ErrInvalid))
		_, err = e.p.Forget(ctx, realmA, tooMany)
		p.add(wantErr(fmt.Sprintf("Forget of %d ids (the batch limit is %d)", len(tooMany), sdk.MaxBatch), err, sdk.ErrTooLarge))
		n, err := e.p.Forget(ctx, realmA, []string{badID})
		if err == nil && n != 0 {
			p.addf("Forget(%q) says it removed %d records", badID, n)
		} else if err != nil && !errors.Is(err, sdk.ErrInvalid) {
			p.addf("Forget(%q): error %q is neither sdk.ErrInvalid nor a count of 0", badID, err)
		}
	}
	if e.has(sdk.CapManifest) {
		_, err = e.p.Manifest(ctx, sdk.ManifestQuery{Realm: badRealm, Tier: sdk.TierFull})
		p.add(wantErr("Manifest in realm "+badRealm, err, sdk.ErrInvalid))
		_, err = e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realmA, Tier: 0})
		p.add(wantErr("Manifest without a tier", err, sdk.ErrInvalid))
		_, err = e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realmA, Tier: sdk.TierFull, Scopes: []sdk.Scope{"bogus"}})
		p.add(wantErr(`Manifest with scope "bogus"`, err, sdk.ErrInvalid))
		_, err = e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realmA, Tier: sdk.TierWorkingSet, K: -1})
		p.add(wantErr("Manifest working set with k -1", err, sdk.ErrInvalid))
	}
	if e.has(sdk.CapSupersede) {
		rec, _ := e.record(scopeAlice)
		_, err = e.p.Supersede(ctx, badRealm, "conformance-id", rec)
		p.add(wantErr("Supersede in realm "+badRealm, err, sdk.ErrInvalid))
		_, err = e.p.Supersede(ctx, realmA, badID, rec)
		if !errors.Is(err, sdk.ErrInvalid) && !errors.Is(err, sdk.ErrNotFound) {
			p.addf("Supersede(%q): error %v, want sdk.ErrInvalid or sdk.ErrNotFound", badID, err)
		}
	}
	if e.has(sdk.CapUsage) {
		err = e.p.MarkUsed(ctx, badRealm, []string{"conformance-id"}, time.Now())
		p.add(wantErr("MarkUsed in realm "+badRealm, err, sdk.ErrInvalid))
	}
	if e.has(sdk.CapLedger) {
		err = e.p.WriteLedger(ctx, []sdk.LedgerEntry{{Realm: badRealm, Identity: "alice", RecordID: "conformance-id", Surface: "turn", At: time.Now()}})
		p.add(wantErr("WriteLedger with realm "+badRealm, err, sdk.ErrInvalid))
	}
	// The plugin must still serve after all that.
	if _, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord}); err != nil {
		p.addf("after bad requests: %v", err)
	}
	return p.err()
}

// deadlineBatch is how many records each write of the Deadline check
// holds: a full batch, so the write takes the plugin long enough for a
// deadline to pass while it works.
const deadlineBatch = sdk.MaxBatch

// checkDeadline: a write whose deadline passes before the plugin commits
// it is not stored later. The host answers its caller deadline_exceeded at
// the deadline, whatever the plugin does; a plugin that goes on and
// commits stores a write its caller was told failed. The kit cannot slow a
// plugin down or see when it commits, so it times a full batch, then, for
// each attempt, sends a full batch and, a quarter of that time later,
// another whose deadline is a tenth of it. A plugin that takes writes one
// at a time (most do) holds the second until its deadline has passed, and
// must refuse it when it gets to it. A write whose deadline passes after
// its commit may still land (deadline_exceeded does not say a write
// failed, only that its caller stopped waiting), so the verdict needs two
// landed writes; one cut in transit, before it reached the plugin, counts
// for neither side. A plugin too fast for any deadline to pass while it
// works passes: nothing it does can be seen.
func checkDeadline(ctx context.Context, e *env) error {
	batch := func(marker string) []sdk.Record {
		recs := make([]sdk.Record, deadlineBatch)
		for i := range recs {
			w := e.word()
			recs[i] = sdk.Record{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Note " + w,
				Body: "The " + w + " record of batch " + marker + ", written against a deadline."}
		}
		return recs
	}
	// The quickest of three writes: the first may pay for a cold store.
	took := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		if _, err := e.remember(ctx, realmA, batch(e.word())...); err != nil {
			return err
		}
		took = min(took, time.Since(start))
	}
	short := took / 10
	var p problems
	cut, landed := 0, 0
	for attempt := 0; attempt < 6 && landed < 2 && cut-landed < 3; attempt++ {
		type done struct {
			err error
			at  time.Time
		}
		ahead := make(chan done, 1)
		first := batch(e.word()) // e's words are not for two goroutines
		go func() {
			_, err := e.remember(ctx, realmA, first...)
			ahead <- done{err, time.Now()}
		}()
		time.Sleep(took / 4)
		marker := e.word()
		recs := batch(marker)
		cutCtx, cancel := context.WithTimeout(ctx, short)
		deadline, _ := cutCtx.Deadline()
		_, err := e.p.Remember(cutCtx, realmA, recs)
		cancel()
		a := <-ahead
		if a.err != nil {
			return fmt.Errorf("the write ahead of a timed one: %w", a.err)
		}
		if err == nil || a.at.Before(deadline) {
			// Done within its deadline, or the plugin was free before the
			// deadline passed (this write may have committed in time).
			continue
		}
		if !errors.Is(err, sdk.ErrDeadline) {
			p.addf("Remember of %d records whose deadline (%v) passed: error %v, want sdk.ErrDeadline", len(recs), short, err)
			continue
		}
		cut++
		// Long enough for a plugin that ignores the deadline to finish.
		for start, wait := time.Now(), 2*took+100*time.Millisecond; ; {
			ok, err := e.stored(ctx, realmA, marker)
			if err != nil {
				return fmt.Errorf("after a Remember cut by its deadline: %w", err)
			}
			if ok {
				landed++
				break
			}
			if time.Since(start) > wait {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if landed >= 2 {
		p.addf("%d of %d Remembers of %d records whose deadline (%v) passed while another write held the plugin were stored anyway, "+
			"after the host had answered its caller deadline_exceeded: check ctx (sdk.ContextErr) right before committing a write, and give up when it is done",
			landed, cut, deadlineBatch, short)
	}
	if _, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord}); err != nil {
		p.addf("after writes cut by their deadline: %v", err)
	}
	return p.err()
}
