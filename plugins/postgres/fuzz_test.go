package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// FuzzParseConfig: any payload either configures within the documented
// bounds or fails with sdk.ErrInvalid, and no error ever repeats the
// connection string's password.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"dsn_env": "DSN"}`, `{"dsn_env": "DSN", "schema": "a_b", "pool_size": 200, "statement_timeout": "10m"}`,
		`{"pool_size": -1}`, `{"statement_timeout": "1ns"}`, `{"schema": ""}`, `{"dsn_env": ""}`, `[]`, `null`,
		`{"dsn_env": "DSN"} {}`, `{"schema": "é"}`, `{"statement_timeout": 5}`,
		`{"replica": {"enabled": false, "poll_interval": "10ms", "read_wait": "0s", "max_lag": "1m", "change_retention": "720h"}}`,
		`{"replica": {"poll_interval": "-1s"}}`, `{"replica": null}`, `{"replica": {"read_wait": 3}}`,
	} {
		f.Add(seed, "postgres://u:topsecretpw@h/db")
	}
	f.Add(`{"dsn_env": "DSN"}`, "host=h password=topsecretpw port=x")
	f.Fuzz(func(t *testing.T, raw, dsn string) {
		getenv := func(k string) string {
			if k == "DSN" || k == DefaultDSNEnv {
				return dsn
			}
			return ""
		}
		s, err := parseConfig([]byte(raw), getenv)
		if err != nil {
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("error %q does not wrap sdk.ErrInvalid", err)
			}
			if strings.Contains(dsn, "topsecretpw") && strings.Contains(err.Error(), "topsecretpw") {
				t.Fatalf("error %q repeats the password", err)
			}
			return
		}
		switch {
		case s.poolSize < 1 || s.poolSize > maxPoolSize:
			t.Fatalf("pool size %d accepted", s.poolSize)
		case s.statementTimeout <= 0 || s.statementTimeout > maxStatementTimeout:
			t.Fatalf("statement timeout %v accepted", s.statementTimeout)
		case s.replica.poll < 10*time.Millisecond || s.replica.readWait < 0 || s.replica.maxLag <= 0 || s.replica.retention < time.Minute:
			t.Fatalf("replica settings %+v accepted", s.replica)
		case !schemaNameRE.MatchString(s.schema):
			t.Fatalf("schema %q accepted", s.schema)
		case s.pool == nil || s.pool.ConnConfig.RuntimeParams["search_path"] != s.schema:
			t.Fatalf("pool not configured for schema %q", s.schema)
		}
	})
}
