package main

import (
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// runCLI runs a one-shot memhost command and answers its standard output.
func runCLI(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), args...)
	cmd.Env = append(cmd.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &cliError{err: err, stderr: stderr.String()}
	}
	return string(out), nil
}

// runCLIStderr is runCLI that also answers standard error.
func runCLIStderr(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), args...)
	cmd.Env = append(cmd.Environ(), env...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		err = &cliError{err: err, stderr: errOut.String()}
	}
	return string(out), errOut.String(), err
}

type cliError struct {
	err    error
	stderr string
}

func (e *cliError) Error() string { return e.err.Error() + ": " + e.stderr }

// exerciseOneShot runs remember, recall and inject through the CLI with
// the given connection flags and checks each answer.
// With sessionsPersist the second identical turn must inject nothing
// (the session's dedup holds across processes).
func exerciseOneShot(t *testing.T, env []string, sessionsPersist bool, conn ...string) {
	t.Helper()
	id, err := runCLI(t, env, append([]string{"remember", "--scope", "identity:alice", "--kind", "preference", "--title", "Coffee order", "--body", "Alice takes her espresso without sugar.", "--tag", "drinks"}, conn...)...)
	if err != nil || !strings.HasPrefix(strings.TrimSpace(id), "r") {
		t.Fatalf("remember = %q, %v", id, err)
	}
	out, err := runCLI(t, env, append([]string{"recall", "--identity", "alice", "how does alice take espresso"}, conn...)...)
	if err != nil || !strings.Contains(out, strings.TrimSpace(id)) {
		t.Fatalf("recall = %q, %v", out, err)
	}
	out, err = runCLI(t, env, append([]string{"inject", "--identity", "alice", "--session", "s1", "espresso, please"}, conn...)...)
	if err != nil || !strings.Contains(out, "Agent memory for identity `alice`") || !strings.Contains(out, "Coffee order") {
		t.Fatalf("inject = %q, %v", out, err)
	}
	if !sessionsPersist {
		return
	}
	// The same turn again injects nothing: the session's dedup holds.
	out, err = runCLI(t, env, append([]string{"inject", "--identity", "alice", "--session", "s1", "espresso, please"}, conn...)...)
	if err != nil || strings.Contains(out, "Coffee order") {
		t.Fatalf("second inject = %q, %v", out, err)
	}
}

func TestOneShotCommandsAgainstAServer(t *testing.T) {
	t.Parallel()
	const token = "cli-token-0123456789abcdef0123"
	m := startMemhost(t, markdownConfig+`
token "ops" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`, "MEMHOST_TEST_TOKEN="+token)
	addr := strings.TrimPrefix(m.base, "http://")
	// Without the token the server refuses, and the command says why.
	if _, err := runCLI(t, nil, "recall", "--identity", "alice", "--addr", addr, "x"); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Fatalf("no token: %v", err)
	}
	exerciseOneShot(t, []string{"MEMHOST_TOKEN=" + token}, true, "--addr", addr)
}

func TestOneShotCommandsLocal(t *testing.T) {
	t.Parallel()
	cfgPath, _ := writeConfig(t, markdownConfig)
	exerciseOneShot(t, nil, true, "--local", "--config", cfgPath)
}
