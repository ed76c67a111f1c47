package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/sdk"
)

// TestWritesThatKeepLosingRacesAreUnavailable: from an outside review. A
// write that lost its race with other writers on every attempt passed the
// last cause on unclassified: a client got 500 internal and the server's
// "deadlock detected", or "a record's thread changed while locking". It
// is unavailable (503, with Retry-After): the same call succeeds once the
// other writers are done.
func TestWritesThatKeepLosingRacesAreUnavailable(t *testing.T) {
	for _, err := range []error{
		&pgconn.PgError{Code: codeDeadlock, Message: "deadlock detected"},
		fmt.Errorf("write: %w", &pgconn.PgError{Code: codeSerialization, Message: "could not serialize access due to concurrent update"}),
		errRelock,
		errCopyGone,
	} {
		if !lostRace(err) {
			t.Errorf("%v is not read as a lost race", err)
			continue
		}
		got := racedOut(err)
		if !errors.Is(got, sdk.ErrUnavailable) {
			t.Errorf("%v after the last attempt = %v, want unavailable", err, got)
		}
		for _, leak := range []string{"deadlock detected", "serialize", "changed while locking", "postgres:"} {
			if strings.Contains(got.Error(), leak) {
				t.Errorf("the message %q repeats the cause's %q", got, leak)
			}
		}
	}
	// Past its retries or on a path that does not retry, a race lost in
	// the server is unavailable too.
	if got := classify(&pgconn.PgError{Code: codeDeadlock, Message: "deadlock detected"}); !errors.Is(got, sdk.ErrUnavailable) {
		t.Errorf("a deadlock = %v, want unavailable", got)
	}
	for _, err := range []error{nil, &pgconn.PgError{Code: codeUniqueViolation}, sdk.ErrInvalid} {
		if lostRace(err) {
			t.Errorf("%v read as a lost race", err)
		}
	}
}

// TestFullDiskSaysSo: from an outside review. A write on a server whose
// disk is full (SQLSTATE 53100: the data directory's tmpfs filled while
// reads went on) answered "the database is unavailable", as an outage, and
// then unavailable where every other provider answers storage_full; it
// names the full disk once, and neither the server's words nor a Go type.
func TestFullDiskSaysSo(t *testing.T) {
	full := &pgconn.PgError{Severity: "ERROR", Code: "53100", Message: `could not extend file "base/16384/16473": No space left on device`}
	got := classify(fmt.Errorf("log changes: %w", full))
	// storage_full, as any provider's full disk, not an outage: a client
	// branches on one code whatever the backend.
	if !errors.Is(got, sdk.ErrNoSpace) || errors.Is(got, sdk.ErrUnavailable) || sdk.CodeOf(got) != sdk.CodeStorageFull {
		t.Fatalf("a full disk = %v (code %s), want storage full", got, sdk.CodeOf(got))
	}
	msg := got.Error()
	if strings.Count(msg, "disk is full") != 1 || strings.Contains(msg, "is unavailable") {
		t.Errorf("a full disk = %q, want it named once, not as an outage", msg)
	}
	for _, leak := range []string{"could not extend", "base/", "pgconn", "PgError", "log changes"} {
		if strings.Contains(msg, leak) {
			t.Errorf("a full disk = %q, names %q", msg, leak)
		}
	}
}
