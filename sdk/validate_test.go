package sdk

import (
	"errors"
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
