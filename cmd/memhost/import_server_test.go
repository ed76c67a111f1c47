package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// recordLine is archive record i as a line of an import file, without its
// line end.
func recordLine(t *testing.T, i int) []byte {
	t.Helper()
	b, err := json.Marshal(archiveLine(i, sdk.StatusActive))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// importServer stands in for memhost's POST /v1/import: it keeps the ids
// of the records it is sent and imports them all.
type importServer struct {
	client *apiClient
	mu     sync.Mutex
	got    []string
}

func newImportServer(t *testing.T) *importServer {
	t.Helper()
	s := &importServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Records []struct{ ID string } `json:"records"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for _, rec := range req.Records {
			s.got = append(s.got, rec.ID)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sdk.ImportResult{Imported: len(req.Records)})
	}))
	t.Cleanup(srv.Close)
	s.client = &apiClient{base: srv.URL, http: srv.Client(), closer: func() {}}
	return s
}

// ids answers the ids imported so far.
func (s *importServer) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// checkLinesOf is checkLines of file, uninterrupted, its progress unshown.
func checkLinesOf(file []byte, realm string, w io.Writer) int {
	bad, err := checkLines(context.Background(), bytes.NewReader(file), realm, w, newCheckProgress(io.Discard, int64(len(file)), false))
	if err != nil {
		panic(err) // only an interrupt ends it early
	}
	return bad
}
