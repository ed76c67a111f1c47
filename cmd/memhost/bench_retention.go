package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/memhost/memhost/internal/bench"
	"github.com/spf13/pflag"
)

// retentionOptions configure the retention benchmark: conversations
// replayed through compaction with a fixed window, then questioned.
type retentionOptions struct {
	on     bool
	window int
	llm    string // "base_url,model[,api_key_env]": also measure the llm compactor
}

func retentionFlags(f *pflag.FlagSet, o *retentionOptions) {
	f.BoolVar(&o.on, "retention", true, "measure how much evidence survives compaction (sqlite provider, template compactor)")
	f.IntVar(&o.window, "retention-window", bench.DefaultWindowBytes, "recent history the model holds, in bytes; compaction runs when it overflows")
	f.StringVar(&o.llm, "retention-llm", "", "also measure the llm compactor on this endpoint: BASE_URL,MODEL[,API_KEY_ENV]")
}

// retentionCompactors answers the compactor configs to measure, by name.
func retentionCompactors(o retentionOptions) ([][2]string, error) {
	out := [][2]string{{"template", `{ plugin = "template" }`}}
	if o.llm == "" {
		return out, nil
	}
	parts := strings.Split(o.llm, ",")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return nil, fmt.Errorf("--retention-llm: want BASE_URL,MODEL[,API_KEY_ENV], got %q", o.llm)
	}
	cfg := fmt.Sprintf("base_url = %q, model = %q, timeout_ms = 120000", parts[0], parts[1])
	if len(parts) == 3 {
		cfg += fmt.Sprintf(", api_key_env = %q", parts[2])
	}
	return append(out, [2]string{"llm", `{
  plugin = "llm"
  config = { ` + cfg + ` }
}`}), nil
}

// runRetention replays LoCoMo samples and LongMemEval questions through
// each compactor on the sqlite provider and writes the table.
func runRetention(ctx context.Context, o benchOptions, w, progress io.Writer) error {
	r := o.retention
	if !r.on {
		return nil
	}
	compactors, err := retentionCompactors(r)
	if err != nil {
		return err
	}
	var replays []bench.Replay
	var missing []string // the data sets not at their default path
	if o.locomo != "" {
		samples, err := bench.LoadLoCoMo(o.locomo)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err != nil {
			missing = append(missing, "LoCoMo ("+o.locomo+")")
		}
		var chosen []bench.Sample
		for _, s := range samples {
			if len(o.samples) == 0 || containsInt(o.samples, s.Index) {
				chosen = append(chosen, s)
			}
		}
		replays = append(replays, bench.LoCoMoReplays(chosen)...)
	}
	if o.longMemEval != "" {
		qs, err := bench.LoadLongMemEval(o.longMemEval)
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, "LongMemEval ("+o.longMemEval+")")
			fmt.Fprintf(progress, "bench: no LongMemEval file at %s; retention runs without it\n", o.longMemEval)
		case err != nil:
			return err
		default:
			lme := bench.LongMemEvalReplays(qs)
			if o.lmeQuestions > 0 && o.lmeQuestions < len(lme) {
				lme = lme[:o.lmeQuestions]
			}
			replays = append(replays, lme...)
		}
	}
	if len(replays) == 0 {
		fmt.Fprintf(progress, "bench: no conversations to replay; skipping retention\n")
		if len(missing) > 0 {
			fmt.Fprintf(w, "\n## Retention through compaction\n\nNot run: no file at the default path of %s.\n", strings.Join(missing, " or "))
		}
		return nil
	}
	fmt.Fprintf(w, "\n## Retention through compaction\n\nsqlite provider; a %d-byte window of recent history, compacted on overflow down to half; evidence turns that reach the model per question (see docs/benchmarks.md).\n\n", r.window)
	if len(missing) > 0 {
		fmt.Fprintf(w, "Without %s: no file at its default path.\n\n", strings.Join(missing, " or "))
	}
	for i, c := range compactors {
		opts := o
		opts.compactor = c[1]
		b, err := startBenchHostOn(ctx, opts, "sqlite", nil)
		if err != nil {
			return fmt.Errorf("retention %s: %w", c[0], err)
		}
		t0 := time.Now()
		rows, err := bench.EvaluateRetention(ctx, retentionHost{b}, replays, bench.RetentionOptions{WindowBytes: r.window},
			progressLine(progress, "retention "+c[0]+" questions"))
		b.close()
		if err != nil {
			return fmt.Errorf("retention %s: %w", c[0], err)
		}
		fmt.Fprintf(progress, "bench: retention %s took %s\n", c[0], time.Since(t0).Round(time.Second))
		if i == 0 {
			bench.WriteRetentionTable(w, c[0], rows)
		} else {
			bench.WriteRetentionRows(w, c[0], rows)
		}
	}
	return nil
}

// retentionHost is a bench host that compacts.
type retentionHost struct{ *benchHost }

// Compact implements bench.CompactTarget.
func (h retentionHost) Compact(ctx context.Context, realm, identity, conversation string, evicted []bench.Message) (string, error) {
	var out struct {
		Artifact struct {
			Content string `json:"content"`
		} `json:"artifact"`
	}
	body := map[string]any{"identity": map[string]string{"realm": realm, "id": identity}, "evicted": evicted}
	err := retried(ctx, func() error {
		return h.post(ctx, "/v1/conversations/"+conversation+"/compact", body, &out)
	})
	return out.Artifact.Content, err
}

// writeAttempts bounds the tries of a bench request that is safe to retry:
// a recall, a write (a duplicate record answers the existing id), a
// compaction's archive write (idempotent), and an injection whose recall
// failed (it changed no session state). On a loaded machine a provider
// call can outlast the host's request timeout, and one 504 failed a whole
// run.
const writeAttempts = 3

// writeRetryWait is the wait before a write's second try, doubled before
// each later one.
var writeRetryWait = time.Second

// retried runs post until it succeeds, fails other than with 503, 504 or
// errInjectRecallFailed, or has been tried writeAttempts times.
func retried(ctx context.Context, post func() error) error {
	wait := writeRetryWait
	var err error
	for attempt := range writeAttempts {
		if attempt > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
			wait *= 2
		}
		err = post()
		var he *benchHTTPError
		if errors.Is(err, errInjectRecallFailed) {
			continue
		}
		if !errors.As(err, &he) || (he.status != http.StatusServiceUnavailable && he.status != http.StatusGatewayTimeout) {
			return err
		}
	}
	return err
}

// errInjectRecallFailed is an injection the host answered empty because
// its recall failed or timed out (skip_reason recall_failed, under the
// default recall_failure_policy). Counted, it would score as a turn that
// delivered no evidence; a turn that injects nothing changes no session
// state, so it is tried again as a recall is.
var errInjectRecallFailed = errors.New("inject: the host's recall failed or timed out (skip_reason recall_failed)")

// benchHTTPError is a bench request answered with a status other than 200.
type benchHTTPError struct {
	path   string
	status int
	body   []byte
}

func (e *benchHTTPError) Error() string {
	return fmt.Sprintf("POST %s: %d %s", e.path, e.status, e.body)
}
