package httpapi

import (
	"net/http"
	"slices"
	"testing"

	"github.com/memhost/memhost/internal/apispec"
	"github.com/memhost/memhost/internal/mcpserver"
)

// TestRoutesMatchTheAPIDocument holds docs/openapi.yaml and the server's
// routes to each other: an undocumented route or a documented path that
// is not served fails.
func TestRoutesMatchTheAPIDocument(t *testing.T) {
	spec, err := apispec.Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{MCP: func(func(http.Header) (mcpserver.Caller, error)) http.Handler { return http.NotFoundHandler() }})
	served, documented := srv.Routes(), spec.Operations()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("served but not in docs/openapi.yaml: %s", r)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("in docs/openapi.yaml but not served: %s", op)
		}
	}
}
