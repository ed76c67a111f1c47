package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/sdk"
)

// SQLSTATE codes the provider branches on.
const (
	codeUniqueViolation    = "23505"
	codeSerialization      = "40001"
	codeDeadlock           = "40P01"
	codeQueryCanceled      = "57014" // statement_timeout
	codeAdminShutdown      = "57P01"
	codeCrashShutdown      = "57P02"
	codeCannotConnectNow   = "57P03"
	codeIdleSessionTimeout = "57P05" // idle_session_timeout
	codeReadOnlySQLTx      = "25006"
	codeUndefinedObject    = "42704" // a setting this server does not have
	codeDiskFull           = "53100"
)

// classify wraps err with the sdk sentinel the host branches on: a
// timeout is sdk.ErrDeadline, a server that cannot be reached, refuses a
// connection or is going down is sdk.ErrUnavailable, a full disk is
// sdk.ErrNoSpace. Anything already carrying a sentinel, and anything
// else, passes through. A connection failure's text (pgconn's names the
// user, database and host:port) never reaches the message: it goes to
// the plugin's log.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{sdk.ErrInvalid, sdk.ErrNotFound, sdk.ErrConflict, sdk.ErrTooLarge, sdk.ErrDeadline, sdk.ErrUnavailable} {
		if errors.Is(err, s) {
			return err
		}
	}
	// Connect-time first: a server refusing a connection (too many
	// connections, starting up, authentication) answers a PgError inside
	// a ConnectError, and that is an outage for the caller, not a bug.
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if errors.As(err, &ce) {
		return unavailable(connectFailure(err), err)
	}
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeQueryCanceled:
			return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
		case pe.Code == codeDeadlock, pe.Code == codeSerialization:
			// Lost to another writer past the retries: the same call
			// succeeds once the others are done.
			return unavailable("the write lost its race with other writers", err)
		case pe.Code == codeReadOnlySQLTx:
			// A primary demoted, or a failover's address still on the
			// standby: the writes go through once it points at a primary.
			return unavailable("the database accepts no writes", err)
		case pe.Code == codeDiskFull:
			// The write stored nothing and reads go on, as on any
			// provider's full disk: the same code, so a client branches
			// on it whatever the backend.
			what := insufficientResource(pe.Code) + " (SQLSTATE " + pe.Code + ")"
			sdk.Logger().Warn(what, "error", err)
			return &hiddenError{msg: what, sentinel: sdk.ErrNoSpace, cause: err}
		case strings.HasPrefix(pe.Code, "53"):
			// The server is up and answers reads: the message names the
			// resource it ran out of, for the operator to add.
			return unavailable(insufficientResource(pe.Code), err)
		case pe.Code == codeAdminShutdown, pe.Code == codeCrashShutdown, pe.Code == codeCannotConnectNow, pe.Code == codeIdleSessionTimeout,
			strings.HasPrefix(pe.Code, "08"): // connection exceptions
			return unavailable("the database is unavailable", err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) ||
		// A connection dropped mid-statement (its server process killed)
		// surfaces as a bare EOF.
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return unavailable("the connection to the database failed", err)
	}
	return err
}

// insufficientResource names what the server ran out of (SQLSTATE class
// 53): a write refused on a full disk must not read as an outage.
func insufficientResource(code string) string {
	switch code {
	case codeDiskFull:
		return "the database's disk is full"
	case "53200":
		return "the database is out of memory"
	case "53300":
		return "the database has too many connections"
	}
	return "the database ran out of a resource"
}

// connectFailure says why a new connection failed: a host name that does
// not resolve, or a server that does not answer, is no refusal, and the
// operator fixing the connection string must know which it is.
func connectFailure(err error) string {
	var de *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "the database's host name does not resolve"
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "the database did not answer a new connection in time"
	}
	return "the database refused a new connection"
}

// startFailure is classify for Configure's connection: the operator
// reads that error at start beside the target Configure names, so the
// server's own words stay ("unsupported startup parameter", "database
// ... does not exist"); a call's error never carries them.
func startFailure(err error) error {
	c := classify(err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && errors.Is(c, sdk.ErrUnavailable) {
		return fmt.Errorf("%s: %w", pe.Message, c)
	}
	return c
}

// unavailable is sdk.ErrUnavailable with a message fit for a client: what
// happened and the SQLSTATE, if any. The cause stays reachable (errors.As)
// and is logged whole.
func unavailable(what string, cause error) error {
	var se *os.SyscallError
	if code := sqlState(cause); code != "" {
		what += " (SQLSTATE " + code + ")"
	} else if errors.As(cause, &se) {
		what += " (" + se.Err.Error() + ")" // "connection refused", with no address
	}
	sdk.Logger().Warn(what, "error", cause)
	return &hiddenError{msg: what + ": " + sdk.ErrUnavailable.Error(), sentinel: sdk.ErrUnavailable, cause: cause}
}

// hiddenError answers msg while wrapping a sentinel and a cause whose text
// must not reach a client.
type hiddenError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *hiddenError) Error() string   { return e.msg }
func (e *hiddenError) Unwrap() []error { return []error{e.sentinel, e.cause} }

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// maxTxAttempts bounds retries of a transaction that lost a deadlock or
// serialization race with another writer (on this host or another).
const maxTxAttempts = 5

// inTx runs fn in a read-committed transaction and commits, retrying the
// whole transaction when PostgreSQL aborted it to break a deadlock, or fn
// found a row changed by another between two of its statements
// (errRelock, errCopyGone).
func inTx(ctx context.Context, db *pgdb, fn func(tx pgx.Tx) error) error {
	var err error
	for range maxTxAttempts {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			// Not committed once the deadline passed: its caller was
			// answered deadline_exceeded.
			return sdk.ContextErr(ctx)
		})
		if !lostRace(err) {
			return classify(err)
		}
	}
	return racedOut(err)
}

// lostRace reports a transaction another writer made fail: PostgreSQL
// aborted it to break a deadlock or a serialization race, or fn found a
// row changed between two of its statements.
func lostRace(err error) bool {
	switch sqlState(err) {
	case codeDeadlock, codeSerialization:
		return true
	}
	return errors.Is(err, errRelock) || errors.Is(err, errCopyGone)
}

// racedOut is the error of a transaction that lost maxTxAttempts races in
// a row: unavailable, since the same call can succeed once the other
// writers are done, and the client is told to try again rather than given
// the server's "deadlock detected" as an internal error.
func racedOut(err error) error {
	return unavailable(fmt.Sprintf("the write lost %d races in a row with other writers", maxTxAttempts), err)
}
