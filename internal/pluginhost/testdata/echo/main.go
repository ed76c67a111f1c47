// Command echo is a test-only provider plugin with misbehaviours switched
// on by environment variables, so host tests can exercise refusal, crash
// and hang handling against a real process.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

type echo struct {
	mu      sync.Mutex
	records []sdk.Record
}

func (e *echo) Info() sdk.Info {
	return sdk.Info{Name: "echo", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1},
		Capabilities: sdk.Capabilities{sdk.CapWrite}}
}

func (e *echo) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("echo: config: %v: %w", err, sdk.ErrInvalid)
	}
	return nil
}

func (e *echo) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	switch q.Query {
	case "crash":
		os.Exit(3)
	case "hang":
		<-ctx.Done()
		time.Sleep(time.Hour)
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
	if len(recs) > 0 && recs[0].Title == "crash" {
		os.Exit(3)
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

func main() {
	if os.Getenv("ECHO_STDOUT_NOISE") != "" {
		fmt.Println("hello from a plugin that talks too much")
	}
	sdk.Serve(&echo{})
}
