package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/memhost/memhost/internal/statedb"
)

// TestConversationsAreKeyedByIdentity: through memhost serve, on the local
// state database and on PostgreSQL's shared state, a conversation id is
// per identity. Another identity using the same id gets its own summary
// and watermark (it used to get 404 because the id was claimed, or, as an
// application, a 409 or a summary built on top of the first identity's),
// and its DELETE leaves the first identity's state. An application forgets
// one identity's (?identity=) or every identity's (none named). On the
// local state database, a state table of the version before identities
// keyed it is migrated on start: an owned conversation continues as its
// owner's, an unowned one is continued by an application for the identity
// it names.
func TestConversationsAreKeyedByIdentity(t *testing.T) {
	t.Parallel()
	t.Run("sqlite state", func(t *testing.T) {
		t.Parallel()
		cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+ownershipTokens)
		m, err := startWithConfig(t, cfgPath, dataDir, ownershipEnv...)
		if err != nil {
			t.Fatal(err)
		}
		testConversationIdentities(t, m)

		for _, conv := range []string{"conv-old", "conv-unowned"} {
			if code, _, e := compactAs(t, m, ownAlice, "alice", conv, history(3)); code != 200 {
				t.Fatalf("alice compacts %s: %d %+v", conv, code, e)
			}
		}
		m.stop()
		// The table as the version before identities keyed it: one row per
		// (realm, conversation), its owner in a column ('' before owners
		// were recorded).
		db, err := sql.Open("sqlite3", filepath.Join(dataDir, statedb.FileName))
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{
			`CREATE TABLE old_state (
				realm TEXT NOT NULL, conversation TEXT NOT NULL, watermark INTEGER NOT NULL, prefix_hash TEXT NOT NULL,
				artifact_role TEXT NOT NULL, artifact_content TEXT NOT NULL, updated_at_ms INTEGER NOT NULL,
				reset_identity TEXT NOT NULL DEFAULT '', reset_session TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',
				PRIMARY KEY (realm, conversation))`,
			`INSERT INTO old_state SELECT realm, conversation, watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms,
				reset_identity, reset_session, CASE conversation WHEN 'conv-unowned' THEN '' ELSE identity END
				FROM compaction_state WHERE identity = 'alice'`,
			`DROP TABLE compaction_state`,
			`ALTER TABLE old_state RENAME TO compaction_state`,
		} {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		m, err = startWithConfig(t, cfgPath, dataDir, ownershipEnv...)
		if err != nil {
			t.Fatal(err)
		}
		if code, res, e := compactAs(t, m, ownAlice, "alice", "conv-old", history(4)); code != 200 || res.Absorbed != 4 || res.Compacted != 1 {
			t.Errorf("alice continues her conversation after the upgrade = %d %+v %+v, want absorbed 4, compacted 1", code, res, e)
		}
		// An agent never reaches the unowned state: its call starts its
		// identity's own conversation.
		if code, res, e := compactAs(t, m, ownAlice, "alice", "conv-unowned", history(4)); code != 200 || res.Absorbed != 4 || res.Compacted != 4 {
			t.Errorf("agent compaction beside an unowned state = %d %+v %+v, want its own conversation", code, res, e)
		}
		if code, res, e := compactAs(t, m, ownApp, "bob", "conv-unowned", history(4)); code != 200 || res.Absorbed != 4 || res.Compacted != 1 {
			t.Errorf("application compaction of the unowned state = %d %+v %+v, want it continued as bob's", code, res, e)
		}
	})
	t.Run("postgres state", func(t *testing.T) {
		t.Parallel()
		deployment := `
host_key_env = "MEMHOST_HOST_KEY"
session_store { kind = "postgres" }
` + providerDeployment("postgres", `{ pool_size = 4 }`) + ownershipTokens
		env := append(postgresEnv(t), append([]string{"MEMHOST_HOST_KEY=" + hsKey}, ownershipEnv...)...)
		testConversationIdentities(t, startMemhost(t, deployment, env...))
	})
}

func testConversationIdentities(t *testing.T, m *instance) {
	t.Helper()
	hello := []map[string]any{{"role": "user", "content": "hello"}}
	helloX := append(hello, map[string]any{"role": "user", "content": "x"})
	step := func(what, token, identity string, evicted []map[string]any, absorbed, compacted int) {
		t.Helper()
		if code, res, e := compactAs(t, m, token, identity, "conv-a", evicted); code != 200 || res.Absorbed != absorbed || res.Compacted != compacted {
			t.Fatalf("%s = %d %+v %+v, want absorbed %d, compacted %d", what, code, res, e, absorbed, compacted)
		}
	}
	del := func(token, path string) {
		t.Helper()
		var e apiError
		if code := m.as(token).do("DELETE", path, nil, &e); code != 204 {
			t.Fatalf("DELETE %s = %d %+v, want 204", path, code, e)
		}
	}
	step("alice compacts conv-a", ownAlice, "alice", history(5), 5, 5)
	step("bob compacts his own conv-a", ownBob, "bob", hello, 1, 1)
	step("the runtime as bob continues bob's conv-a", ownRuntime, "bob", helloX, 2, 1)
	step("alice continues hers", ownAlice, "alice", history(6), 6, 1)

	del(ownBob, "/v1/conversations/conv-a")
	step("alice's survives bob's DELETE", ownAlice, "alice", history(6), 6, 0)
	step("bob's starts over after his DELETE", ownBob, "bob", hello, 1, 1)
	var e apiError
	if code := m.as(ownRuntime).do("DELETE", "/v1/conversations/conv-a", nil, &e); code != 400 || e.Error.Code != "invalid_argument" {
		t.Errorf("runtime DELETE naming no identity = %d %+v, want 400", code, e)
	}
	if code := m.as(ownBob).do("DELETE", "/v1/conversations/conv-a?identity=alice", nil, &e); code != 403 {
		t.Errorf("bob's token DELETE as alice = %d %+v, want 403", code, e)
	}

	// An application compacts the conversation of the identity it names.
	step("the application continues bob's", ownApp, "bob", helloX, 2, 1)
	del(ownApp, "/v1/conversations/conv-a?identity=alice")
	step("alice's starts over after the application's DELETE of hers", ownAlice, "alice", history(2), 2, 2)
	step("bob's survives the application's DELETE of alice's", ownBob, "bob", helloX, 2, 0)
	del(ownApp, "/v1/conversations/conv-a")
	step("alice's starts over after the application's DELETE of all", ownAlice, "alice", history(1), 1, 1)
	step("bob's starts over after the application's DELETE of all", ownBob, "bob", hello, 1, 1)
}

// TestUncommittedEpisodesAreTheirIdentitys: memhost serve killed after
// alice's first compaction archived its episodes and before its summary
// committed leaves episodes and no state. Bob using the same conversation
// id afterwards (compacting it, deleting it) leaves them alone (they used
// to share his episodes' ids, so his archive write cleared them and his
// DELETE removed them), and alice's retry commits them once.
func TestUncommittedEpisodesAreTheirIdentitys(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+ownershipTokens)
	m, err := startWithConfig(t, cfgPath, dataDir, append([]string{killAfterArchiveEnv + "=1"}, ownershipEnv...)...)
	if err != nil {
		t.Fatal(err)
	}
	pids := pluginPids(t, m.as(ownApp))
	h := lockerHistory()
	data, _ := json.Marshal(map[string]any{"identity": map[string]string{"id": "alice"}, "evicted": h})
	req, _ := http.NewRequest("POST", m.base+"/v1/conversations/conv-1/compact", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ownAlice)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	exited := make(chan struct{})
	go func() { m.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("memhost did not die after the archive write\n%s", m.logs())
	}
	if ws, ok := m.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("memhost ended with %v, want SIGKILL\n%s", m.cmd.ProcessState, m.logs())
	}
	waitGone(t, pids)

	m, err = startWithConfig(t, cfgPath, dataDir, ownershipEnv...)
	if err != nil {
		t.Fatal(err)
	}
	app := m.as(ownApp)
	if eps := listEpisodes(t, app, "default"); len(eps) != len(h) {
		t.Fatalf("after the kill: %d episodes, want the %d archived before it", len(eps), len(h))
	}
	if code, res, e := compactAs(t, m, ownBob, "bob", "conv-1", []map[string]any{{"role": "user", "content": "bob's first message"}}); code != 200 || res.Compacted != 1 {
		t.Fatalf("bob compacts conv-1 = %d %+v %+v", code, res, e)
	}
	if code := m.as(ownBob).do("DELETE", "/v1/conversations/conv-1", nil, nil); code != 204 {
		t.Fatalf("bob's DELETE = %d", code)
	}
	eps := listEpisodes(t, app, "default")
	if len(eps) != len(h) {
		t.Fatalf("after bob compacted and deleted conv-1: %d episodes, want alice's %d", len(eps), len(h))
	}
	for seq, ep := range eps {
		if ep.Scope != "identity:alice" {
			t.Errorf("episode %d is in %s, want alice's scope", seq, ep.Scope)
		}
	}
	if code, res, e := compactAs(t, m, ownAlice, "alice", "conv-1", h); code != 200 || res.Compacted != len(h) {
		t.Fatalf("alice's retry = %d %+v %+v, want the whole slice compacted", code, res, e)
	}
	if eps := listEpisodes(t, app, "default"); len(eps) != len(h) {
		t.Errorf("after alice's retry: %d episodes, want %d (none twice)", len(eps), len(h))
	}
	if code := m.as(ownAlice).do("DELETE", "/v1/conversations/conv-1", nil, nil); code != 204 {
		t.Fatalf("alice's DELETE = %d", code)
	}
	if eps := listEpisodes(t, app, "default"); len(eps) != 0 {
		t.Errorf("%d episodes after alice's DELETE", len(eps))
	}
}
