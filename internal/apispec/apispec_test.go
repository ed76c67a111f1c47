package apispec

import "testing"

func TestDocumentLoads(t *testing.T) {
	s, err := Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Operations()) < 10 {
		t.Fatalf("operations = %v", s.Operations())
	}
	t.Log(s.Operations())
}
