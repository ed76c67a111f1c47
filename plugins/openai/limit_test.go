package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// raceDetector is set by race_test.go in a -race build, whose JSON
// decoding is ten times slower.
var raceDetector bool

// longAnswers answers every input dims copies of value, in compact JSON,
// or junk bytes of junk length when that is not 0.
func longAnswers(t *testing.T, dims int, value string, junk int) *httptest.Server {
	vec := strings.TrimSuffix(strings.Repeat(value+",", dims), ",")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req embeddingsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if junk > 0 {
			w.Write([]byte(strings.Repeat(" ", junk)))
			return
		}
		w.Write([]byte(`{"object":"list","data":[`))
		for i := range req.Input {
			if i > 0 {
				w.Write([]byte(","))
			}
			fmt.Fprintf(w, `{"object":"embedding","index":%d,"embedding":[%s]}`, i, vec)
		}
		w.Write([]byte(`],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLargeAnswers: how much of an answer is read follows the request. A
// full answer of long vectors printed as float64s (as Python servers
// print them) is read however large, and a one-text request answered
// with megabytes is cut early.
func TestLargeAnswers(t *testing.T) {
	texts := func(n int) []string { return strings.Split(strings.Repeat("a ", n-1)+"a", " ") }
	t.Run("a large batch of long vectors", func(t *testing.T) {
		if raceDetector || testing.Short() {
			t.Skip("decodes 70 MB of JSON")
		}
		const dims, n = 8192, 360 // 360 x 8192 values of 23 bytes: 68 MB
		srv := longAnswers(t, dims, "-0.0070322175510227680", 0)
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": %d, "request_batch": 1000, "max_retries": 0}`, srv.URL, dims), nil, nil)
		vecs, err := e.Embed(t.Context(), docs(texts(n)...))
		if err != nil || len(vecs) != n {
			t.Fatalf("Embed: %d vectors, %v; want %d", len(vecs), err, n)
		}
	})
	t.Run("megabytes for one text", func(t *testing.T) {
		srv := longAnswers(t, 4, "0.5", 8<<20)
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_retries": 0}`, srv.URL), nil, nil)
		_, err := e.Embed(t.Context(), docs("a"))
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "is over") {
			t.Fatalf("Embed: %v, want an answer too large", err)
		}
	})
}
