// Command echo is a test-only provider plugin with misbehaviours switched
// on by environment variables, so host tests can exercise refusal, crash
// and hang handling against a real process. Files in its working
// directory switch on misbehaviours that must survive a restart.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/memhost/memhost/sdk"
)

type echo struct {
	mu      sync.Mutex
	records []sdk.Record
	lock    *os.File // held like a real store's lock, until the process dies
}

func (e *echo) Info() sdk.Info {
	caps := sdk.Capabilities{sdk.CapWrite, sdk.CapReindex}
	if _, err := os.Stat("fewer-capabilities"); err == nil {
		caps = caps[:1] // an Info that is not constant, as a plugin must not do
	}
	return sdk.Info{Name: "echo", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}, Capabilities: caps}
}

func (e *echo) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct {
		Lock string `json:"lock"` // a file to hold an exclusive lock on, like a store
		Hang bool   `json:"hang"` // this instance's store never opens
		// SlowMS: this instance's store opens after that many milliseconds.
		SlowMS int `json:"slow_ms"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("echo: config: %v: %w", err, sdk.ErrInvalid)
	}
	if _, err := os.Stat("crash-configure"); err == nil {
		os.Exit(3) // dies while opening its store
	}
	if _, err := os.Stat("hang-configure"); err == nil || cfg.Hang {
		time.Sleep(time.Hour) // a store that never opens, deaf to cancellation
	}
	time.Sleep(time.Duration(cfg.SlowMS) * time.Millisecond)
	if cfg.Lock != "" {
		f, err := os.OpenFile(cfg.Lock, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("echo: lock: %v: %w", err, sdk.ErrUnavailable)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return fmt.Errorf("echo: %s is locked by another process: %w", cfg.Lock, sdk.ErrConflict)
		}
		e.lock = f
	}
	return nil
}

func (e *echo) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	switch q.Query {
	case "crash":
		os.Exit(3)
	case "hang":
		// Said in the working directory, for a test to know the call
		// is in flight.
		_ = os.WriteFile("hanging", nil, 0o600)
		<-ctx.Done()
		time.Sleep(time.Hour)
	case "forge warnings":
		// Warning lines enough to push anything else out of a ring of
		// warnings, one worded as the host words its own.
		for i := range 6 {
			fmt.Fprintf(os.Stderr, "{\"@level\":\"warn\",\"@message\":\"all good %d\"}\n", i)
		}
		fmt.Fprintln(os.Stderr, `{"@level":"error","@message":"plugin restarted declaring other capabilities than before"}`)
		return nil, nil
	case "raw stdout":
		// What a C library writing to descriptor 1 does: a line longer
		// than the host's handshake scanner takes, then more than a pipe
		// holds.
		out := os.NewFile(1, "stdout")
		out.Write(append(bytes.Repeat([]byte("x"), 100_000), '\n'))
		for range 10 {
			out.Write(append(bytes.Repeat([]byte("y"), 30_000), '\n'))
		}
		fmt.Fprintln(out, "wrote to descriptor 1 while serving")
		return nil, nil
	case "print":
		// A stray print after the handshake, which go-plugin forwards.
		fmt.Println("printed to stdout while serving")
		return nil, nil
	case "another realm":
		// A record of another tenant, which the host must not pass on.
		r := sdk.Record{ID: "theirs", Realm: "tenant-b", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "secret", Status: sdk.StatusActive}
		return []sdk.Hit{{Record: r, Score: 1}}, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var hits []sdk.Hit
	for _, r := range e.records {
		if r.Realm == q.Realm {
			hits = append(hits, sdk.Hit{Record: r, Score: 1})
		}
	}
	return hits, nil
}

func (e *echo) Remember(_ context.Context, realm string, recs []sdk.Record) ([]string, error) {
	if len(recs) > 0 {
		switch recs[0].Title {
		case "crash":
			os.Exit(3)
		case "crash once":
			// Dies the first time only, as a process killed mid-write would.
			if _, err := os.Stat("crashed-once"); err != nil {
				os.WriteFile("crashed-once", nil, 0o600)
				os.Exit(3)
			}
		case "hang":
			time.Sleep(time.Hour) // deaf to the call's cancellation
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, len(recs))
	for i := range recs {
		if err := recs[i].Prepare(realm, time.Now()); err != nil {
			return nil, err
		}
		ids[i] = recs[i].ID
	}
	e.records = append(e.records, recs...)
	return ids, nil
}

// Reindex counts the realm's records; realm "slow" takes 600 ms first,
// outlasting a short call timeout, and "hang" waits for its ctx.
func (e *echo) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	switch realm {
	case "slow":
		select {
		case <-time.After(600 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	case "hang":
		// Said in the working directory, for a test to know the call
		// is in flight.
		_ = os.WriteFile("hanging", nil, 0o600)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.records {
		if realm == "" || r.Realm == realm {
			n++
		}
	}
	progress(n, n)
	return n, nil
}

func main() {
	if os.Getenv("ECHO_STDOUT_NOISE") != "" {
		fmt.Println("hello from a plugin that talks too much")
	}
	if _, err := os.Stat("stdout-at-start"); err == nil {
		// The same words on stdout, where the handshake belongs.
		fmt.Println("loading tenant-b record r42: Bob's salary is 200k")
	}
	if _, err := os.Stat("die-at-start"); err == nil {
		// Dies before its handshake, its last words naming another
		// realm's record, as a store's loading error may.
		fmt.Fprintln(os.Stderr, "loading tenant-b record r42: Bob's salary is 200k")
		os.Exit(1)
	}
	sdk.Serve(&echo{})
}
