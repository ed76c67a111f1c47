package conformance

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// vectorModel is the model id the kit's vectors claim.
const vectorModel = "conformance-model"

// missingAll pages through MissingVectors with pages of one, checking the
// order is stable (no id twice), and answers every id it listed.
func missingAll(ctx context.Context, e *env, realm, model string) ([]string, error) {
	var out []string
	for after := ""; ; {
		page, err := e.p.MissingVectors(ctx, realm, model, after, 1)
		if err != nil {
			return nil, fmt.Errorf("MissingVectors(%s, %s, after %q): %w", realm, model, after, err)
		}
		if len(page) > 1 {
			return nil, fmt.Errorf("MissingVectors(%s, limit 1) answered %d ids", realm, len(page))
		}
		if len(page) == 0 {
			return out, nil
		}
		if slices.Contains(out, page[0]) {
			return nil, fmt.Errorf("MissingVectors(%s) listed %s twice while paging", realm, page[0])
		}
		out = append(out, page[0])
		after = page[0]
	}
}

// vectorFirst recalls with a query vector and no text and answers the
// hits, checking the first is want.
func vectorFirst(ctx context.Context, e *env, q sdk.RecallQuery, want string) ([]sdk.Hit, error) {
	q.VectorModel, q.Limit = vectorModel, listLimit
	hits, err := e.recall(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(hits) == 0 || hits[0].Record.ID != want {
		return nil, fmt.Errorf("Recall(query vector %v, scopes %v, tags %v, excluded %v) answered %v, want %s first",
			q.QueryVector, q.Scopes, q.Tags, q.ExcludeIDs, hitIDs(hits), want)
	}
	return hits, nil
}

// checkVectors: MissingVectors lists the live records without a vector of
// the model, stably; PutVectors stores them (an unknown id is skipped);
// recall with a query vector and no text ranks the nearest record first,
// under the same scope, tag and exclusion filters as text; a forgotten
// record's vector goes with it; vectors survive a restart and a reindex.
func checkVectors(ctx context.Context, e *env) error {
	a, _ := e.record(scopeAlice)
	a.Tags = []string{"red"}
	b, _ := e.record(scopeAlice)
	c, _ := e.record(scopeBob)
	d, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, a, b, c, d)
	if err != nil {
		return err
	}
	idA, idB, idC, idD := ids[0], ids[1], ids[2], ids[3]
	got, err := missingAll(ctx, e, realmA, vectorModel)
	if err != nil {
		return err
	}
	if !sameSet(got, ids) {
		return fmt.Errorf("MissingVectors before any put listed %v, want %v", got, ids)
	}
	if got, err := missingAll(ctx, e, realmB, vectorModel); err != nil || len(got) != 0 {
		return fmt.Errorf("MissingVectors of the empty realm %s: %v, %v; want none", realmB, got, err)
	}
	err = e.p.PutVectors(ctx, realmA, []sdk.RecordVector{
		{ID: idA, Model: vectorModel, Vector: []float32{1, 0, 0, 0}},
		{ID: idB, Model: vectorModel, Vector: []float32{0, 1, 0, 0}},
		{ID: "conformance-gone", Model: vectorModel, Vector: []float32{0, 1, 0, 0}},
		{ID: idC, Model: vectorModel, Vector: []float32{0, 0, 1, 0}},
	})
	if err != nil {
		return fmt.Errorf("PutVectors with an unknown id (skipped, not an error): %w", err)
	}
	// Realm B holds none of these ids: skipped there too.
	if err := e.p.PutVectors(ctx, realmB, []sdk.RecordVector{{ID: idA, Model: vectorModel, Vector: []float32{1, 0, 0, 0}}}); err != nil {
		return fmt.Errorf("PutVectors into realm %s of another realm's id: %w", realmB, err)
	}
	if got, err := missingAll(ctx, e, realmA, vectorModel); err != nil || !slices.Equal(got, []string{idD}) {
		return fmt.Errorf("MissingVectors after the put: %v, %v; want only %s", got, err, idD)
	}
	if got, err := missingAll(ctx, e, realmA, "conformance-other-model"); err != nil || !sameSet(got, ids) {
		return fmt.Errorf("MissingVectors of another model: %v, %v; want every record", got, err)
	}
	nearB := []float32{0.1, 1, 0, 0}
	if _, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: nearB}, idB); err != nil {
		return err
	}
	if _, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: nearB, Scopes: []sdk.Scope{scopeBob}}, idC); err != nil {
		return err
	}
	if _, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: nearB, ExcludeIDs: []string{idB}}, idA); err != nil {
		return err
	}
	hits, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: nearB, Tags: []string{"red"}}, idA)
	if err != nil {
		return err
	}
	if len(hits) != 1 {
		return fmt.Errorf("Recall(query vector, tags [red]) answered %v, want only %s", hitIDs(hits), idA)
	}
	if hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmB, QueryVector: nearB, VectorModel: vectorModel}); err != nil || len(hits) != 0 {
		return fmt.Errorf("Recall(realm %s, query vector): %v, %v; want nothing", realmB, hitIDs(hits), err)
	}
	if _, err := e.p.Forget(ctx, realmA, []string{idB}); err != nil {
		return fmt.Errorf("Forget: %w", err)
	}
	hits, err = vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: nearB}, idA)
	if err != nil {
		return fmt.Errorf("after forgetting %s: %w", idB, err)
	}
	if slices.Contains(hitIDs(hits), idB) {
		return fmt.Errorf("a forgotten record %s is still recalled by its vector", idB)
	}
	if err := e.restart(ctx); err != nil {
		return err
	}
	if _, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: []float32{0, 0, 1, 0.1}}, idC); err != nil {
		return fmt.Errorf("after a restart: %w", err)
	}
	if e.has(sdk.CapReindex) {
		// A rebuilt index keeps the stored vectors.
		if _, err := e.p.Reindex(ctx, realmA, nil); err != nil {
			return fmt.Errorf("Reindex(%s): %w", realmA, err)
		}
		if _, err := vectorFirst(ctx, e, sdk.RecallQuery{Realm: realmA, QueryVector: []float32{1, 0, 0.1, 0}}, idA); err != nil {
			return fmt.Errorf("after a reindex: %w", err)
		}
	}
	if got, err := missingAll(ctx, e, realmA, vectorModel); err != nil || !slices.Equal(got, []string{idD}) {
		return fmt.Errorf("MissingVectors after a restart: %v, %v; want only %s", got, err, idD)
	}
	return nil
}

// checkBadVectors: a vector of another length than its model's stored
// ones, and a query vector of another length or model, are sdk.ErrInvalid;
// so are vectors that are empty, zero or not finite, and a model id that
// is empty.
func checkBadVectors(ctx context.Context, e *env) error {
	r, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, r, func() sdk.Record { r2, _ := e.record(scopeAlice); return r2 }())
	if err != nil {
		return err
	}
	if err := e.p.PutVectors(ctx, realmA, []sdk.RecordVector{{ID: ids[0], Model: vectorModel, Vector: []float32{1, 2, 3}}}); err != nil {
		return fmt.Errorf("PutVectors: %w", err)
	}
	var p problems
	p.add(wantErr("PutVectors of another length than the model's",
		e.p.PutVectors(ctx, realmA, []sdk.RecordVector{{ID: ids[1], Model: vectorModel, Vector: []float32{1, 2}}}), sdk.ErrInvalid))
	for _, bad := range []sdk.RecordVector{
		{ID: ids[1], Model: vectorModel},
		{ID: ids[1], Model: vectorModel, Vector: []float32{0, 0, 0}},
		{ID: ids[1], Model: vectorModel, Vector: []float32{1, float32(math.NaN()), 0}},
		{ID: ids[1], Vector: []float32{1, 2, 3}},
	} {
		p.add(wantErr(fmt.Sprintf("PutVectors of %v by model %q", bad.Vector, bad.Model), e.p.PutVectors(ctx, realmA, []sdk.RecordVector{bad}), sdk.ErrInvalid))
	}
	for _, q := range []sdk.RecallQuery{
		{Realm: realmA, QueryVector: []float32{1, 2}, VectorModel: vectorModel},
		{Realm: realmA, QueryVector: []float32{1, 2, 3}, VectorModel: "conformance-other-model"},
		{Realm: realmA, QueryVector: []float32{1, 2, 3}},
		{Realm: realmA, QueryVector: []float32{1, 2, 3}, VectorModel: vectorModel, Fusion: sdk.Fusion{Lexical: -1}},
	} {
		_, err := e.p.Recall(ctx, q)
		p.add(wantErr(fmt.Sprintf("Recall with query vector %v by model %q, fusion %+v", q.QueryVector, q.VectorModel, q.Fusion), err, sdk.ErrInvalid))
	}
	return p.err()
}

// checkStaleVectors: a vector whose ContentHash is not the record's (it
// was made from text the record held before a change) is skipped, not an
// error, and the record stays in the backlog; one whose ContentHash is
// the record's is stored. With archive, an id forgotten and imported
// again with other text does not take the vector made from the old text.
func checkStaleVectors(ctx context.Context, e *env) error {
	r, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, r)
	if err != nil {
		return err
	}
	id := ids[0]
	made := func(title, body string) sdk.RecordVector {
		return sdk.RecordVector{ID: id, Model: vectorModel, Vector: []float32{1, 0, 0, 0}, ContentHash: sdk.ContentHash(title, body)}
	}
	stillMissing := func(what string) error {
		got, err := missingAll(ctx, e, realmA, vectorModel)
		if err != nil || !slices.Contains(got, id) {
			return fmt.Errorf("after %s, MissingVectors answered %v, %v; want %s listed (the vector was made from other text)", what, got, err, id)
		}
		return nil
	}
	if err := e.p.PutVectors(ctx, realmA, []sdk.RecordVector{made(r.Title, r.Body+" as it was")}); err != nil {
		return fmt.Errorf("PutVectors of a vector made from other text (skipped, not an error): %w", err)
	}
	if err := stillMissing("a put made from other text"); err != nil {
		return err
	}
	if err := e.p.PutVectors(ctx, realmA, []sdk.RecordVector{made(r.Title, r.Body)}); err != nil {
		return fmt.Errorf("PutVectors of a vector made from the record's text: %w", err)
	}
	if got, err := missingAll(ctx, e, realmA, vectorModel); err != nil || slices.Contains(got, id) {
		return fmt.Errorf("after a put made from the record's own text, MissingVectors answered %v, %v; want %s stored", got, err, id)
	}
	if !e.has(sdk.CapArchive) || !e.has(sdk.CapForget) {
		return nil
	}
	if _, err := e.p.Forget(ctx, realmA, []string{id}); err != nil {
		return fmt.Errorf("Forget: %w", err)
	}
	again, _ := e.record(scopeAlice)
	again.ID, again.Trust, again.Status = id, sdk.TrustApplication, sdk.StatusActive
	again.CreatedAt = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	again.UpdatedAt = again.CreatedAt
	res, err := e.p.Import(ctx, realmA, []sdk.Record{again})
	if err != nil {
		return fmt.Errorf("Import of a forgotten id with other text: %w", err)
	}
	if res.Imported == 0 {
		return nil // the provider keeps forgotten ids: nothing reuses this one
	}
	if err := e.p.PutVectors(ctx, realmA, []sdk.RecordVector{made(r.Title, r.Body)}); err != nil {
		return fmt.Errorf("PutVectors of the forgotten text's vector: %w", err)
	}
	return stillMissing("a put made from a forgotten record's text onto the record imported under its id")
}
