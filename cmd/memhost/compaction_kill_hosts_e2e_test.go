package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// TestCompactionRetryAfterAHostKilledMidway: a host is killed (SIGKILL)
// in the middle of a compaction, its archive written and its summary not;
// the client's retry on another host compacts at once (the dead host's
// hold on the conversation lapses within its lease), rather than wait
// for it until the request's deadline and answer 504.
func TestCompactionRetryAfterAHostKilledMidway(t *testing.T) {
	t.Parallel()
	hs := startHalfStates(t)
	a := hs.hosts[0]
	dying := startMemhost(t, halfStatesDeployment, append(hs.env, killAfterArchiveEnv+"=1")...)
	evicted := history(6)
	body, err := json.Marshal(map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s-kill", "evicted": evicted})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", dying.base+"/v1/conversations/conv-kill/compact", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+hsApp)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the compaction on the host killed midway answered %d", resp.StatusCode)
	}
	_ = dying.cmd.Wait()

	code, res, e := compact(t, a, "conv-kill", "s-kill", evicted)
	if code != http.StatusOK || res.Compacted != len(evicted) || res.Absorbed != len(evicted) {
		t.Fatalf("retry on the other host = %d %+v %+v, want every message compacted once", code, res, e)
	}
}
