package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/redact"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Reindex rebuilds a realm provider's index from its records. It is an
// application caller's alone: it costs the provider minutes of work at
// scale, and an agent has no business starting that.
//
// The answer is JSON Lines (application/x-ndjson), written as the plugin
// reports: progress lines, then one result line, or one error line when
// the reindex fails after progress was already sent. A refusal before the
// first progress line (auth, role, unsupported, conflict) is an ordinary
// error answer with its status.

type reindexRequest struct {
	Realm string `json:"realm"`
}

// ReindexProgress is one progress line of a reindex answer.
type ReindexProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// ReindexResult is the last line of a successful reindex answer.
type ReindexResult struct {
	Realm      string  `json:"realm"`
	Reindexed  int     `json:"reindexed"`
	DurationMs float64 `json:"duration_ms"`
}

// ReindexLine is one line of a reindex answer; exactly one field is set.
type ReindexLine struct {
	Progress *ReindexProgress `json:"progress,omitempty"`
	Result   *ReindexResult   `json:"result,omitempty"`
	Error    *ErrorDetail     `json:"error,omitempty"`
}

// reindexGuard refuses a second reindex of a realm while one runs, so an
// impatient operator's retry cannot double the provider's work.
type reindexGuard struct {
	mu      sync.Mutex
	running map[string]bool
}

func (g *reindexGuard) enter(realm string) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[realm] {
		return nil, fmt.Errorf("a reindex of realm %q is already running; wait for it to finish: %w", realm, sdk.ErrConflict)
	}
	if g.running == nil {
		g.running = map[string]bool{}
	}
	g.running[realm] = true
	return func() {
		g.mu.Lock()
		delete(g.running, realm)
		g.mu.Unlock()
	}, nil
}

// minProgressGap spaces progress lines: a terminal's bar needs no more,
// and a fast rebuild should not spend its time writing them.
const minProgressGap = 100 * time.Millisecond

func (s *Server) handleReindex(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req reindexRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := c.requireApplication("reindex"); err != nil {
		return err
	}
	// A rebuild reads every identity's records, and its progress and
	// result count them, which a bound token's listings never do.
	if err := c.requireRealmWide("reindexes"); err != nil {
		return err
	}
	realm, p, err := s.provider(c, req.Realm)
	if err != nil {
		return err
	}
	rx, ok := host.ProviderOf(p).Reindexer()
	if !ok {
		return fmt.Errorf("the provider of realm %q cannot rebuild its index (it does not declare the reindex capability): %w", realm, sdk.ErrUnsupported)
	}
	release, err := s.reindex.enter(realm)
	if err != nil {
		return err
	}
	leave := sync.OnceFunc(release)
	defer leave()

	start := time.Now()
	out := &lineWriter{w: w}
	defer out.close()
	n, err := rx.Reindex(ctx, realm, out.progress)
	// Done before the last line goes out: a caller that has read it may
	// start the next reindex at once.
	leave()
	if err != nil {
		err = fmt.Errorf("reindex realm %q: %w", realm, err)
		if !out.started() {
			return err
		}
		// The status line is gone; the error travels as the last line.
		reqID := w.Header().Get(HeaderRequestID)
		var body errorBody
		body.Error.Code = codeOf(err)
		body.Error.Message, _ = redact.Message(clientMessage(err))
		body.Error.RequestID = reqID
		out.write(ReindexLine{Error: &body.Error})
		log := hclog.FromContext(ctx)
		if errors.Is(err, context.Canceled) {
			// The caller went away: its choice, not an operator's error.
			log.Info("reindex canceled; the old index stays", "realm", realm, "duration_ms", msSince(start))
		} else {
			log.Error("reindex failed after it started; the old index stays", "realm", realm, "duration_ms", msSince(start), "error", err)
		}
		return nil
	}
	hclog.FromContext(ctx).Info("reindexed", "realm", realm, "records", n, "duration_ms", msSince(start))
	out.write(ReindexLine{Result: &ReindexResult{Realm: realm, Reindexed: n, DurationMs: msSince(start)}})
	return nil
}

// lineWriter writes JSON Lines, flushing each, and sends the 200 status
// with the first. A provider may report progress from its own goroutine,
// so writes are serialised, and none happens once the handler is done.
type lineWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	begun  bool
	closed bool
	last   time.Time // of the last progress line
}

// progress writes a progress line, spaced so a fast rebuild is not slowed
// by its own reporting; the last count always goes out.
func (l *lineWriter) progress(done, total int) {
	l.mu.Lock()
	now := time.Now()
	skip := now.Sub(l.last) < minProgressGap && done != total
	if !skip {
		l.last = now
	}
	l.mu.Unlock()
	if !skip {
		l.write(ReindexLine{Progress: &ReindexProgress{Done: done, Total: total}})
	}
}

func (l *lineWriter) write(v ReindexLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if !l.begun {
		l.w.Header().Set("Content-Type", "application/x-ndjson")
		l.w.WriteHeader(http.StatusOK)
		l.begun = true
	}
	enc := json.NewEncoder(l.w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (l *lineWriter) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.begun
}

func (l *lineWriter) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
