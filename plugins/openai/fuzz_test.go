package openai

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// FuzzDecode: whatever an endpoint answers, decode either refuses it or
// answers exactly n vectors of dims finite values, none missing.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":1,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`), 2, 2)
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`), 2, 2)
	f.Add([]byte(`{"data":[{"embedding":[1]}]}`), 1, 1)
	f.Add([]byte(`{"data":null}`), 1, 1)
	f.Add([]byte(`{"data":[{"index":-1,"embedding":[1]}]}`), 1, 1)
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1e39]}]}`), 1, 1)
	f.Add([]byte(`[]`), 0, 1)
	f.Fuzz(func(t *testing.T, data []byte, n, dims int) {
		if n < 0 || n > 64 || dims < 1 || dims > 64 {
			t.Skip()
		}
		vecs, err := decode(data, n, dims)
		if err != nil {
			return
		}
		if len(vecs) != n {
			t.Fatalf("%d vectors for %d texts", len(vecs), n)
		}
		for i, v := range vecs {
			if len(v) != dims {
				t.Fatalf("vector %d has %d values, want %d", i, len(v), dims)
			}
			for _, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("vector %d holds %v", i, x)
				}
			}
		}
	})
}

// FuzzRetryAfter: any header value gives a wait within 0..MaxBackoff.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []string{"", "0", "1.5", "-1", "1e308", "NaN", "Inf", now.Add(time.Minute).Format(http.TimeFormat), "Fri, 31 Dec 9999 23:59:59 GMT"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d := retryAfter(v, now); d < 0 || d > MaxBackoff {
			t.Fatalf("retryAfter(%q) = %s, outside 0..%s", v, d, MaxBackoff)
		}
	})
}
