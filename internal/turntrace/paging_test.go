package turntrace_test

import (
	"testing"

	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/internal/turntrace/tracetest"
)

// TestPaging: see tracetest.CheckPaging.
func TestPaging(t *testing.T) {
	db, err := statedb.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := turntrace.NewSQLStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	tracetest.CheckPaging(t, s)
}
