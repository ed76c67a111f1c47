package sdk

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk/internal/wire"
)

var may1 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

func TestCheckRecall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		q         RecallQuery
		wantLimit int
		field     string // "" means valid
	}{
		{"default limit", RecallQuery{Realm: "default"}, DefaultRecallLimit, ""},
		{"capped limit", RecallQuery{Realm: "default", Limit: MaxBatch + 5}, MaxBatch, ""},
		{"kept limit", RecallQuery{Realm: "default", Limit: 3, Scopes: []Scope{RealmScope, IdentityScope("a")}}, 3, ""},
		{"bad realm", RecallQuery{Realm: "../x"}, 0, "realm"},
		{"bad scope", RecallQuery{Realm: "default", Scopes: []Scope{RealmScope, "team:x"}}, 0, "scopes[1]"},
		{"negative limit", RecallQuery{Realm: "default", Limit: -1}, 0, "limit"},
		{"bad exclude id", RecallQuery{Realm: "default", ExcludeIDs: []string{"ok", "a/b"}}, 0, "exclude_ids[1]"},
		{"window", RecallQuery{Realm: "default", Since: may1, Until: may1.Add(time.Hour)}, DefaultRecallLimit, ""},
		{"open window", RecallQuery{Realm: "default", Until: may1}, DefaultRecallLimit, ""},
		{"empty window", RecallQuery{Realm: "default", Since: may1, Until: may1}, 0, "until"},
		{"reversed window", RecallQuery{Realm: "default", Since: may1, Until: may1.Add(-time.Millisecond)}, 0, "until"},
		{"since past 9999", RecallQuery{Realm: "default", Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, 0, "since"},
		{"until before year 1", RecallQuery{Realm: "default", Until: time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)}, 0, "until"},
		{"query vector", RecallQuery{Realm: "default", QueryVector: []float32{0, 1}, VectorModel: "BAAI/bge-small-en-v1.5", Fusion: Fusion{Lexical: 1}}, DefaultRecallLimit, ""},
		{"vector without model", RecallQuery{Realm: "default", QueryVector: []float32{1}}, 0, "vector_model"},
		{"model without vector", RecallQuery{Realm: "default", VectorModel: "m"}, 0, "vector_model"},
		{"model with a space", RecallQuery{Realm: "default", QueryVector: []float32{1}, VectorModel: "a b"}, 0, "vector_model"},
		{"empty vector", RecallQuery{Realm: "default", QueryVector: []float32{}, VectorModel: "m"}, 0, "query_vector"},
		{"zero vector", RecallQuery{Realm: "default", QueryVector: []float32{0, 0}, VectorModel: "m"}, 0, "query_vector"},
		{"NaN in vector", RecallQuery{Realm: "default", QueryVector: []float32{1, float32(math.NaN())}, VectorModel: "m"}, 0, "query_vector[1]"},
		{"too many dimensions", RecallQuery{Realm: "default", QueryVector: make([]float32, MaxVectorDimensions+1), VectorModel: "m"}, 0, "query_vector"},
		{"negative fusion", RecallQuery{Realm: "default", Fusion: Fusion{Lexical: 1, Semantic: -0.1}}, 0, "fusion.semantic"},
		{"infinite fusion", RecallQuery{Realm: "default", Fusion: Fusion{Lexical: math.Inf(1)}}, 0, "fusion.lexical"},
		{"neighbours 1", RecallQuery{Realm: "default", Neighbours: 1}, DefaultRecallLimit, ""},
		{"neighbours at the maximum", RecallQuery{Realm: "default", Neighbours: MaxNeighbours}, DefaultRecallLimit, ""},
		{"neighbours over the maximum", RecallQuery{Realm: "default", Neighbours: MaxNeighbours + 1}, 0, "neighbours"},
		{"negative neighbours", RecallQuery{Realm: "default", Neighbours: -1}, 0, "neighbours"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkRecall(tc.q)
			if tc.field == "" {
				if err != nil || got.Limit != tc.wantLimit {
					t.Fatalf("checkRecall = %+v, %v; want limit %d", got, err, tc.wantLimit)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("checkRecall err = %v, want an invalid %s", err, tc.field)
			}
		})
	}
}

func TestCheckWriteAndLedger(t *testing.T) {
	good := Record{Scope: RealmScope, Kind: KindFact, Title: "t"}
	entry := LedgerEntry{Realm: "default", Identity: "a", RecordID: "r", Surface: "turn", Session: strings.Repeat("s", MaxLedgerSessionBytes), Bytes: 10}
	ledger := func(edit func(*LedgerEntry)) LedgerEntry { e := entry; edit(&e); return e }
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"valid batch", checkWrite("default", []Record{good, good}), "", nil},
		{"bad record", checkWrite("default", []Record{good, {Scope: RealmScope, Kind: "rumour", Title: "t"}}), "records[1].kind", ErrInvalid},
		{"batch too large", checkWrite("default", make([]Record, MaxBatch+1)), "records", ErrTooLarge},
		{"too many ids", checkIDs("ids", make([]string, MaxBatch+1)), "ids", ErrTooLarge},
		{"ledger identity", checkLedger([]LedgerEntry{{Realm: "default", Identity: "", RecordID: "r"}}), "entries[0].identity.id", ErrInvalid},
		{"ledger record id", checkLedger([]LedgerEntry{{Realm: "default", Identity: "a", RecordID: ".r"}}), "entries[0].record_id", ErrInvalid},
		{"valid ledger", checkLedger([]LedgerEntry{entry, entry}), "", nil},
		{"ledger blank surface", checkLedger([]LedgerEntry{entry, ledger(func(e *LedgerEntry) { e.Surface = " " })}), "entries[1].surface", ErrInvalid},
		{"ledger long surface", checkLedger([]LedgerEntry{ledger(func(e *LedgerEntry) { e.Surface = strings.Repeat("s", MaxLedgerSurfaceBytes+1) })}), "entries[0].surface", ErrTooLarge},
		{"ledger session NUL", checkLedger([]LedgerEntry{ledger(func(e *LedgerEntry) { e.Session = "a\x00b" })}), "entries[0].session", ErrInvalid},
		{"ledger session not UTF-8", checkLedger([]LedgerEntry{ledger(func(e *LedgerEntry) { e.Session = "\xff" })}), "entries[0].session", ErrInvalid},
		{"ledger long session", checkLedger([]LedgerEntry{ledger(func(e *LedgerEntry) { e.Session = strings.Repeat("s", MaxLedgerSessionBytes+1) })}), "entries[0].session", ErrTooLarge},
		{"ledger negative bytes", checkLedger([]LedgerEntry{ledger(func(e *LedgerEntry) { e.Bytes = -1 })}), "entries[0].bytes", ErrInvalid},
		{"manifest tier", checkManifest(ManifestQuery{Realm: "default"}), "tier", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if tc.err != nil {
					t.Fatal(tc.err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(tc.err, &fe) || fe.Field != tc.want || !errors.Is(tc.err, tc.is) || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v for %s", tc.err, tc.is, tc.want)
			}
		})
	}
}

// TestMessageLimitFitsRecords: the wire's message limit is sized from the
// record limits; changing one without the other fails here.
func TestMessageLimitFitsRecords(t *testing.T) {
	want := MaxBatch * (MaxBodyBytes + MaxTitleBytes + MaxDescriptionBytes + MaxTags*MaxTagBytes + 1024)
	if wire.MaxMessageBytes != want {
		t.Fatalf("wire.MaxMessageBytes = %d, the record limits need %d", wire.MaxMessageBytes, want)
	}
}

func TestCheckVectors(t *testing.T) {
	vec := func(id string) RecordVector { return RecordVector{ID: id, Model: "m", Vector: []float32{1, 0}} }
	many := make([]RecordVector, MaxBatch+1)
	for i := range many {
		many[i] = vec("r" + strings.Repeat("x", i%5))
	}
	for _, tc := range []struct {
		name  string
		err   error
		field string // "" means valid
		is    error
	}{
		{"put", checkPutVectors("default", []RecordVector{vec("a"), vec("b")}), "", nil},
		{"put bad realm", checkPutVectors("a/b", nil), "realm", ErrInvalid},
		{"put bad id", checkPutVectors("default", []RecordVector{vec("a"), vec("a/b")}), "vectors[1].id", ErrInvalid},
		{"put repeated id", checkPutVectors("default", []RecordVector{vec("a"), vec("a")}), "vectors[1].id", ErrInvalid},
		{"put no model", checkPutVectors("default", []RecordVector{{ID: "a", Vector: []float32{1}}}), "vectors[0].model", ErrInvalid},
		{"put zero vector", checkPutVectors("default", []RecordVector{{ID: "a", Model: "m", Vector: []float32{0}}}), "vectors[0].vector", ErrInvalid},
		{"put infinite", checkPutVectors("default", []RecordVector{{ID: "a", Model: "m", Vector: []float32{float32(math.Inf(-1))}}}), "vectors[0].vector[0]", ErrInvalid},
		{"put too many", checkPutVectors("default", many), "vectors", ErrTooLarge},
		{"put content hash", checkPutVectors("default", []RecordVector{{ID: "a", Model: "m", Vector: []float32{1}, ContentHash: ContentHash("t", "b")}}), "", nil},
		{"put short content hash", checkPutVectors("default", []RecordVector{{ID: "a", Model: "m", Vector: []float32{1}, ContentHash: "abc"}}), "vectors[0].content_hash", ErrInvalid},
		{"put upper-case content hash", checkPutVectors("default", []RecordVector{{ID: "a", Model: "m", Vector: []float32{1}, ContentHash: strings.ToUpper(ContentHash("t", "b"))}}), "vectors[0].content_hash", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.field == "" {
				if tc.err != nil {
					t.Fatal(tc.err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(tc.err, &fe) || fe.Field != tc.field || !errors.Is(tc.err, tc.is) {
				t.Fatalf("err = %v, want %v at %s", tc.err, tc.is, tc.field)
			}
		})
	}
	for _, tc := range []struct {
		model, after string
		limit, want  int
		field        string
	}{
		{"m", "", 0, MaxExportPage, ""},
		{"m", "r1", 7, 7, ""},
		{"m", "", MaxExportPage + 1, MaxExportPage, ""},
		{"", "", 1, 0, "model"},
		{"m", "a/b", 1, 0, "after"},
		{"m", "", -1, 0, "limit"},
	} {
		got, err := checkMissingVectors("default", tc.model, tc.after, tc.limit)
		var fe *FieldError
		switch {
		case tc.field == "" && (err != nil || got != tc.want):
			t.Errorf("checkMissingVectors(%q, %q, %d) = %d, %v; want %d", tc.model, tc.after, tc.limit, got, err, tc.want)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("checkMissingVectors(%q, %q, %d) err = %v, want one at %s", tc.model, tc.after, tc.limit, err, tc.field)
		}
	}
}

func TestValidateUses(t *testing.T) {
	many := make([]Use, MaxBatch+1)
	for i := range many {
		many[i] = Use{ID: fmt.Sprintf("r%d", i), Count: 1}
	}
	for _, tc := range []struct {
		name  string
		uses  []Use
		field string // "" when valid
		is    error
	}{
		{"none", nil, "", nil},
		{"valid", []Use{{ID: "a", Count: 1}, {ID: "b", Count: MaxUseCount}}, "", nil},
		{"the batch limit", many[:MaxBatch], "", nil},
		{"over the batch limit", many, "uses", ErrTooLarge},
		{"repeated id", []Use{{ID: "a", Count: 1}, {ID: "b", Count: 1}, {ID: "a", Count: 2}}, "uses[2].id", ErrInvalid},
		{"bad id", []Use{{ID: "a/b", Count: 1}}, "uses[0].id", ErrInvalid},
		{"zero count", []Use{{ID: "a", Count: 0}}, "uses[0].count", ErrInvalid},
		{"negative count", []Use{{ID: "a", Count: -3}}, "uses[0].count", ErrInvalid},
		{"count over the limit", []Use{{ID: "a", Count: MaxUseCount + 1}}, "uses[0].count", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateUses("uses", tc.uses)
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("ValidateUses = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.is)):
				t.Fatalf("ValidateUses = %v, want %v at %s", err, tc.is, tc.field)
			}
		})
	}
}

func TestOneUseEach(t *testing.T) {
	got := OneUseEach([]string{"b", "a", "b", "c", "a"})
	want := []Use{{ID: "b", Count: 1}, {ID: "a", Count: 1}, {ID: "c", Count: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OneUseEach = %v, want %v", got, want)
	}
	if got := OneUseEach(nil); len(got) != 0 {
		t.Fatalf("OneUseEach(nil) = %v", got)
	}
}
