package apispec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateClients = flag.Bool("update-clients", false, "rewrite clients/operations.json from docs/openapi.yaml")

// clientOperation is one documented operation as the client libraries name
// it: its operationId, or "METHOD /path" for one without.
type clientOperation struct {
	Key    string `json:"key"`
	Method string `json:"method"`
	Path   string `json:"path"`
}

// TestClientOperationList keeps clients/operations.json, the list of
// operations the Python and TypeScript clients' tests hold their method
// tables against, equal to the document's. A new operation fails here until
// the list is regenerated (go test ./internal/apispec -run
// TestClientOperationList -update-clients), then fails the client tests
// until each client has a method for it.
func TestClientOperationList(t *testing.T) {
	s, err := Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ops []clientOperation
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := op.OperationID
			if key == "" {
				key = strings.ToUpper(method) + " " + path
			}
			ops = append(ops, clientOperation{Key: key, Method: strings.ToUpper(method), Path: path})
		}
	}
	slices.SortFunc(ops, func(a, b clientOperation) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	want, err := json.MarshalIndent(map[string]any{
		"comment":    "Generated from docs/openapi.yaml by TestClientOperationList in internal/apispec (-update-clients); do not edit.",
		"operations": ops,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	const file = "../../clients/operations.json"
	if *updateClients {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		var listed struct{ Operations []clientOperation }
		if err := json.Unmarshal(got, &listed); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Errorf("%s differs from the operations of docs/openapi.yaml (documented only: %v; listed only: %v); regenerate it with -update-clients and give each client a method for a new operation",
			file, missing(ops, listed.Operations), missing(listed.Operations, ops))
	}
}

// missing answers the operations of a that b lacks, as "key (METHOD /path)".
func missing(a, b []clientOperation) []string {
	var out []string
	for _, op := range a {
		if !slices.Contains(b, op) {
			out = append(out, op.Key+" ("+op.Method+" "+op.Path+")")
		}
	}
	return out
}
