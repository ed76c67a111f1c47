// Package conformance is the behaviour suite every memhost provider plugin
// must pass. One call runs it from a Go test:
//
//	func TestConformance(t *testing.T) {
//		conformance.RunProvider(t, conformance.Target{
//			New:    func() sdk.Plugin { return myprovider.New() },
//			Config: func(dir string) json.RawMessage { return json.RawMessage(`{"path":"` + dir + `/db"}`) },
//		})
//	}
//
// The plugin is driven only through the host-side client (host.Provider
// over real gRPC), exactly as memhost sees it: either served inside the test
// process through go-plugin's test mode (Target.New; coverage and debuggers
// work) or started from a built executable (Target.Binary), sha256-checked,
// with AutoMTLS and its working directory set to the data directory.
//
// Every check runs against a fresh plugin on a fresh, empty data directory.
// A check that needs a capability the plugin does not declare is skipped
// with the reason; a capability that is declared must behave.
package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Target says how to start the plugin under test. Set exactly one of New
// and Binary.
type Target struct {
	// Name labels the plugin in errors; it defaults to the name its Info
	// reports.
	Name string

	// New returns a fresh, unconfigured plugin value each call. The kit
	// serves it in-process over real gRPC (host.ServeInProcess) and closes
	// it (io.Closer) when it stops the plugin, as sdk.Serve does.
	New func() sdk.Plugin

	// Binary is the path of a built plugin executable. The kit starts it
	// the way the host does (host.Launch), with its working directory set to
	// the check's data directory.
	Binary string

	// Config answers the plugin's configuration for a data directory (an
	// absolute path the kit creates empty for each check). It must be a
	// JSON object; nil means "{}". An in-process plugin shares the test's
	// working directory, so build absolute paths from dataDir.
	Config func(dataDir string) json.RawMessage

	// Manifest is an optional path to the plugin's manifest
	// (<name>.plugin.json); when set, the plugin's Info must match it, and
	// for a Binary target its executable and sha256 must match too. A
	// script's manifest (one naming an interpreter) makes the kit start the
	// script as the host does: through the pinned interpreter, its tree
	// checked.
	Manifest string

	// BadConfigs are configurations the plugin must refuse with an error
	// wrapping sdk.ErrInvalid. An unknown key and a non-object are always
	// tried.
	BadConfigs []json.RawMessage

	// Logger receives the plugin's and go-plugin's logs; nil discards them.
	Logger hclog.Logger

	// CheckTimeout bounds each check; zero means two minutes.
	CheckTimeout time.Duration

	// StartTimeout bounds each start of a Binary target's process, as the
	// host's; zero means the host's default: host.DefaultStartTimeout, or
	// host.DefaultInterpretedStartTimeout for a script whose manifest
	// names its interpreter. A script run through its shebang (no
	// manifest) wants host.DefaultInterpretedStartTimeout too.
	StartTimeout time.Duration
}

// Result is the outcome of one check.
type Result struct {
	Check string
	// Skipped is the reason the check did not run; "" when it ran.
	Skipped string
	// Err describes every problem found; nil when the check passed or was
	// skipped.
	Err error
}

// Suite runs the checks against one target.
type Suite struct {
	target   Target
	name     string
	info     sdk.Info
	checksum []byte
	// verifier hashes the executable once for the suite's many starts
	// (again only if the file changes).
	verifier *host.Verifier
	// interpreted is how a script whose manifest names its interpreter is
	// started; nil otherwise.
	interpreted *host.Interpreted
	logger      hclog.Logger
}

// NewSuite validates the target, hashes its executable and starts it once
// to read its Info, which decides the capability-gated skips.
func NewSuite(ctx context.Context, target Target) (*Suite, error) {
	if (target.New == nil) == (target.Binary == "") {
		return nil, errors.New("conformance: set exactly one of Target.New and Target.Binary")
	}
	s := &Suite{target: target, name: target.Name, logger: target.Logger}
	if s.logger == nil {
		s.logger = hclog.NewNullLogger()
	}
	if target.Binary != "" {
		abs, err := filepath.Abs(target.Binary)
		if err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		s.target.Binary = abs
		sum, err := fileSHA256(abs)
		if err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		s.checksum = sum
		s.verifier = host.NewVerifier()
		if target.Manifest != "" {
			// Started as the host starts it; a manifest that does not parse
			// is the Manifest check's to report.
			if data, err := os.ReadFile(target.Manifest); err == nil {
				if m, err := host.ParseManifest(data); err == nil {
					s.interpreted = m.Interpreted(filepath.Dir(target.Manifest))
				}
			}
		}
	}
	if s.name == "" {
		s.name = "plugin-under-test"
	}
	inst, err := s.launch(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	s.info = inst.conn.Info()
	inst.close()
	if target.Name == "" && s.info.Name != "" {
		s.name = s.info.Name
	}
	return s, nil
}

// Info is what the plugin reported when the suite started it.
func (s *Suite) Info() sdk.Info { return s.info }

// Checks names every check, in the order RunProvider runs them.
func (s *Suite) Checks() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// Run runs the named check against a fresh plugin on dataDir, which must
// be an empty directory, and stops the plugin before it returns.
func (s *Suite) Run(ctx context.Context, name, dataDir string) Result {
	res := Result{Check: name}
	c := findCheck(name)
	if c == nil {
		res.Err = fmt.Errorf("conformance: no check named %q", name)
		return res
	}
	if res.Skipped = c.skipReason(s); res.Skipped != "" {
		return res
	}
	timeout := s.target.CheckTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e := &env{suite: s, dir: dataDir}
	if !c.unopened {
		if err := e.open(ctx); err != nil {
			res.Err = fmt.Errorf("%s: %w", s.name, err)
			return res
		}
	}
	err := c.run(ctx, e)
	// Stopping cleanly is part of every check: Close must not fail.
	err = errors.Join(err, e.close())
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", s.name, err)
	}
	return res
}

// RunProvider runs every check as a subtest of t, each on its own
// temporary data directory. Skipped checks say why; run a subset with
// `go test -run 'TestConformance/RoundTrip'` or leave one out with -skip.
func RunProvider(t *testing.T, target Target) {
	t.Helper()
	s, err := NewSuite(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conformance: %s %s, capabilities %v", s.info.Name, s.info.Version, s.info.Capabilities)
	for _, name := range s.Checks() {
		t.Run(name, func(t *testing.T) {
			r := s.Run(t.Context(), name, t.TempDir())
			switch {
			case r.Skipped != "":
				t.Skip(r.Skipped)
			case r.Err != nil:
				t.Error(r.Err)
			}
		})
	}
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hash %s: %w", path, err)
	}
	return h.Sum(nil), nil
}
