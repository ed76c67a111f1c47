// Command chatty is a test-only provider plugin that logs at every point of
// a plugin's life (in Configure, in a call, in a background goroutine, and
// straight to os.Stderr) and refuses one config key and one record field of
// its own, so end-to-end tests can see both reach the host. Its hang key
// holds Configure until the host gives it up.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

type chatty struct {
	mu      sync.Mutex
	records []sdk.Record
}

func (c *chatty) Info() sdk.Info {
	return sdk.Info{Name: "chatty", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion},
		Capabilities: sdk.Capabilities{sdk.CapWrite}}
}

func (c *chatty) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg := struct {
		Greeting string `json:"greeting"`
		// Hang holds Configure until the host gives it up: a store that
		// takes minutes to open.
		Hang bool `json:"hang"`
	}{Greeting: "hello"}
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	if cfg.Greeting == "" {
		return &sdk.FieldError{Field: "greeting", Problem: "must not be empty", Err: sdk.ErrInvalid}
	}
	host, _ := sdk.HostFrom(ctx)
	log := sdk.Logger()
	log.Info("chatty configured", "greeting", cfg.Greeting, "host_version", host.Version)
	log.Debug("chatty configure detail")
	go func() {
		log.Warn("chatty background goroutine", "started", time.Now().UTC().Format(time.RFC3339))
		fmt.Fprintln(os.Stderr, "chatty raw stderr line")
	}()
	if cfg.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *chatty) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	// Logged with the call's context, so the line carries the request id.
	sdk.Logger().InfoContext(ctx, "chatty recall", "query", q.Query)
	return []sdk.Hit{}, nil
}

// Remember refuses a body holding "forbidden": a field only this plugin
// refuses, so the refusal must come across the wire with its field.
func (c *chatty) Remember(_ context.Context, realm string, records []sdk.Record) ([]string, error) {
	ids := make([]string, len(records))
	for i := range records {
		if strings.Contains(records[i].Body, "forbidden") {
			return nil, &sdk.FieldError{Field: fmt.Sprintf("records[%d].body", i), Problem: "chatty refuses the word forbidden", Err: sdk.ErrInvalid}
		}
		if err := records[i].Prepare(realm, time.Now()); err != nil {
			return nil, err
		}
		ids[i] = records[i].ID
	}
	c.mu.Lock()
	c.records = append(c.records, records...)
	c.mu.Unlock()
	return ids, nil
}

func main() { sdk.Serve(&chatty{}) }
