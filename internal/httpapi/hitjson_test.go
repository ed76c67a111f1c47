package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// encodeHitsJSON is what writeJSON sends for hits: the reference
// appendHits must match byte for byte.
func encodeHitsJSON(t *testing.T, hits []sdk.Hit) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := writeJSON(rec, 200, map[string]any{"hits": hits}); err != nil {
		t.Fatal(err)
	}
	return rec.Body.Bytes()
}

// fullHit sets every field of a record, found by reflection, so a field
// added to sdk.Record and not to appendHit shows up as a difference.
func fullHit(t *testing.T) sdk.Hit {
	t.Helper()
	var r sdk.Record
	v := reflect.ValueOf(&r).Elem()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + " value")
		case reflect.Int64:
			f.SetInt(int64(i) + 40)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"a", "b c"}))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			f.Elem().Field(0).SetString("thread-1")
			f.Elem().Field(1).SetInt(7)
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(time.Time{}) {
				t.Fatalf("sdk.Record.%s: a field kind this test does not fill", v.Type().Field(i).Name)
			}
			f.Set(reflect.ValueOf(at.Add(time.Duration(i) * time.Hour)))
		default:
			t.Fatalf("sdk.Record.%s: a field kind this test does not fill", v.Type().Field(i).Name)
		}
	}
	return sdk.Hit{Record: r, Score: 12.5}
}

// randomText draws strings with what JSON must escape: quotes,
// backslashes, control bytes, HTML characters, U+2028/2029, invalid UTF-8.
func randomText(rng *rand.Rand) string {
	pieces := []string{"a", "Zz", " ", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "🙂", "/", "\u00a0"}
	var b []byte
	for range rng.IntN(12) {
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return string(b)
}

func TestAppendHitsMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	times := []time.Time{{}, time.Unix(0, 0).UTC(), time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2025, 1, 2, 3, 4, 5, 120, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, zone),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}
	scores := []float64{0, 1, -1, 0.1, 1.0 / 3, 1e-7, -2.5e-9, 1e20, 1e21, 123456789.125, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Copysign(0, -1)}
	cases := map[string][]sdk.Hit{"none": {}, "full": {fullHit(t)}}
	for n := range 300 {
		hits := make([]sdk.Hit, rng.IntN(4))
		for i := range hits {
			r := sdk.Record{ID: randomText(rng), Realm: randomText(rng), Scope: sdk.Scope(randomText(rng)), Kind: sdk.RecordKind(randomText(rng)),
				Title: randomText(rng), Description: randomText(rng), Body: randomText(rng), Trust: sdk.Trust(randomText(rng)),
				Status: sdk.Status(randomText(rng)), Supersedes: randomText(rng), ContentHash: randomText(rng), UseCount: rng.Int64N(5) - 1,
				CreatedAt: times[rng.IntN(len(times))], UpdatedAt: times[rng.IntN(len(times))], ExpiresAt: times[rng.IntN(len(times))],
				LastUsedAt: times[rng.IntN(len(times))], OccurredAt: times[rng.IntN(len(times))]}
			for range rng.IntN(3) {
				r.Tags = append(r.Tags, randomText(rng))
			}
			if rng.IntN(2) == 0 {
				r.Tags = []string{} // empty, not nil: omitted all the same
			}
			if rng.IntN(2) == 0 {
				r.Thread = &sdk.Thread{ID: randomText(rng), Seq: rng.Int64N(100) - 50}
			}
			hits[i] = sdk.Hit{Record: r, Score: scores[rng.IntN(len(scores))]}
		}
		cases[string(rune('a'+n%26))+string(rune('0'+n/26%10))+string(rune('0'+n/260))] = hits
	}
	for name, hits := range cases {
		want := encodeHitsJSON(t, hits)
		got, ok := appendHits(nil, hits)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: appendHits (ok %v)\n%s\nencoding/json\n%s", name, ok, got, want)
		}
		rec := httptest.NewRecorder()
		writeHits(rec, hits)
		if !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: writeHits sent %q (%s), want %q", name, rec.Body.Bytes(), rec.Header().Get("Content-Type"), want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not valid JSON: %s", name, got)
		}
	}
}

// FuzzAppendHits: for any text, score and time, appendHits writes what
// encoding/json writes, or declines what encoding/json refuses.
func FuzzAppendHits(f *testing.F) {
	f.Add("r1", "Coffee <b>order</b>", "line\u2028two \xff", 0.5, int64(1767225600), int64(7))
	f.Add("", "\x00\x1f\"\\", "🙂&é", -1e21, int64(-62135596800), int64(0))
	f.Fuzz(func(t *testing.T, id, title, body string, score float64, unix, nanos int64) {
		at := time.Unix(unix, nanos).UTC()
		hits := []sdk.Hit{{Record: sdk.Record{ID: id, Title: title, Body: body, Tags: []string{title, body},
			CreatedAt: at, OccurredAt: at, Thread: &sdk.Thread{ID: body, Seq: nanos}}, Score: score}}
		got, ok := appendHits(nil, hits)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(recallResponse{Hits: hits})
		if ok != (err == nil) {
			t.Fatalf("appendHits ok %v, encoding/json error %v", ok, err)
		}
		if ok && !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("appendHits\n%s\nencoding/json\n%s", got, buf.Bytes())
		}
	})
}

// A value encoding/json refuses is not answered: writeHits, like
// writeJSON, writes nothing and returns the refusal for the route to
// answer 500 (TestUnencodableAnswerIs500), never an empty 200.
func TestWriteHitsRefusedValues(t *testing.T) {
	for name, h := range map[string]sdk.Hit{
		"NaN score":      {Score: math.NaN()},
		"infinite score": {Score: math.Inf(-1)},
		"year 10000":     {Record: sdk.Record{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		"year -1":        {Record: sdk.Record{OccurredAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		hits := []sdk.Hit{h}
		if _, ok := appendHits(nil, hits); ok {
			t.Errorf("%s: appendHits encoded what encoding/json refuses", name)
		}
		rec := httptest.NewRecorder()
		err := writeHits(rec, hits)
		if err == nil || rec.Body.Len() > 0 || rec.Header().Get("Content-Length") != "" {
			t.Errorf("%s: writeHits answered %q (header %v), error %v; want nothing written and an error", name, rec.Body.Bytes(), rec.Header(), err)
		}
		if err != nil && strings.Contains(err.Error(), "json:") {
			t.Errorf("%s: the error quotes encoding/json: %v", name, err)
		}
	}
}

func BenchmarkRecallAnswer(b *testing.B) {
	hits := make([]sdk.Hit, 10)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000000, time.UTC)
	for i := range hits {
		hits[i] = sdk.Hit{Score: 3.25 / float64(i+1), Record: sdk.Record{ID: "01J8ZQ5V6Y2W3X4Y5Z6A7B8C9D", Realm: "default",
			Scope: "identity:u042", Kind: "fact", Title: "w12 w3k w9 wab", Description: "w1 w2 w3 w4 w5 w6 w7 w8",
			Body: string(bytes.Repeat([]byte("w1f w22 w7 "), 45)), Trust: "trusted", Status: "active",
			ContentHash: "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", CreatedAt: at, UpdatedAt: at}}
	}
	for _, v := range []struct {
		name  string
		write func(*httptest.ResponseRecorder)
	}{
		{"encoding-json", func(w *httptest.ResponseRecorder) { writeJSON(w, 200, map[string]any{"hits": hits}) }},
		{"append", func(w *httptest.ResponseRecorder) { writeHits(w, hits) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.write(httptest.NewRecorder())
			}
		})
	}
}
