package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/sdk"
)

// SQLSTATE codes the provider branches on.
const (
	codeUniqueViolation  = "23505"
	codeSerialization    = "40001"
	codeDeadlock         = "40P01"
	codeQueryCanceled    = "57014" // statement_timeout
	codeAdminShutdown    = "57P01"
	codeCrashShutdown    = "57P02"
	codeCannotConnectNow = "57P03"
)

// classify wraps err with the sdk sentinel the host branches on: a
// timeout is sdk.ErrDeadline, a server that cannot be reached or is going
// down is sdk.ErrUnavailable. Anything already carrying a sentinel, and
// anything else, passes through.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{sdk.ErrInvalid, sdk.ErrNotFound, sdk.ErrConflict, sdk.ErrTooLarge, sdk.ErrDeadline, sdk.ErrUnavailable} {
		if errors.Is(err, s) {
			return err
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeQueryCanceled:
			return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
		}
		if len(pe.Code) == 2+3 && pe.Code[:2] == "08" { // connection exceptions
			return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
	}
	return err
}

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
// whole transaction when PostgreSQL aborted it to break a deadlock.
func inTx(ctx context.Context, db *pgdb, fn func(tx pgx.Tx) error) error {
	var err error
	for range maxTxAttempts {
		err = pgx.BeginFunc(ctx, db, fn)
		switch sqlState(err) {
		case codeDeadlock, codeSerialization:
			continue
		}
		if errors.Is(err, errRelock) {
			continue
		}
		return classify(err)
	}
	return classify(err)
}
