package main

import (
	"strings"
	"testing"
)

// A second serve, or a --local command, on a data directory a server
// holds is refused by the directory and the way out (the running
// server's address), not by the state database's lock file, which the
// operator never named: it read "state database lock D/memhost-state.db.lock:
// in use by another memhost" and nothing more.
func TestDataDirInUseSaysTheWayOut(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, "")
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(m.base, "http://")
	for _, tc := range []struct {
		name string
		args []string
		fix  string
	}{
		{"serve", []string{"serve", "--config", cfgPath, "--listen", "127.0.0.1:0"}, "give this one its own --data-dir"},
		{"--local", []string{"recall", "--local", "--config", cfgPath, "--identity", "alice", "coffee"}, "--addr " + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(t, nil, tc.args...)
			if err == nil {
				t.Fatal("a second memhost on a held data directory started")
			}
			msg := err.(*cliError).stderr
			want := "data directory " + dataDir + " is in use by another memhost, serving at " + addr
			if !strings.Contains(msg, want) || !strings.Contains(msg, tc.fix) {
				t.Fatalf("stderr = %q, want %q and %q", msg, want, tc.fix)
			}
			if strings.Contains(msg, ".lock") {
				t.Fatalf("stderr = %q names the lock file", msg)
			}
		})
	}
}
