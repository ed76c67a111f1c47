package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// endless reads pattern again and again, for ever.
type endless struct {
	pattern []byte
	off     int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.pattern[e.off]
		e.off = (e.off + 1) % len(e.pattern)
	}
	return len(p), nil
}

// slowLines reads lines one at a time, a pause before each.
type slowLines struct {
	lines [][]byte
	pause time.Duration
}

func (s *slowLines) Read(p []byte) (int, error) {
	if len(s.lines) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p, s.lines[0])
	if s.lines[0] = s.lines[0][n:]; len(s.lines[0]) == 0 {
		s.lines = s.lines[1:]
	}
	return n, nil
}

// TestImportStopsWhenInterrupted: an interrupt stops an import and the
// --strict check promptly, also while they read nothing but bad lines
// (the wrong file, an endless pipe) or one endless line (/dev/zero).
func TestImportStopsWhenInterrupted(t *testing.T) {
	for _, input := range []struct {
		name    string
		pattern string
	}{
		{"endless bad lines", "not json\n"},
		{"endless line", "\x00"},
	} {
		for _, phase := range []string{"import", "strict check"} {
			t.Run(input.name+", "+phase, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					r := &endless{pattern: []byte(input.pattern)}
					if phase == "import" {
						_, err := importFrom(ctx, &apiClient{}, importOptions{batch: 500}, r, io.Discard, newProgress(io.Discard, -1, false))
						done <- err
						return
					}
					_, err := checkLines(ctx, r, "default", io.Discard, newCheckProgress(io.Discard, -1, false))
					done <- err
				}()
				time.Sleep(100 * time.Millisecond)
				cancel()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("stopped with %v, want the interrupt", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("still reading 10 s after the interrupt")
				}
			})
		}
	}
}

// TestImportShowsProgressOfBadLines: a long run of bad lines, and the
// --strict check, show progress as they go, not only at the end.
func TestImportShowsProgressOfBadLines(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 10 * time.Millisecond
	const n = 150
	lines := func() (*slowLines, int64) {
		s := &slowLines{pause: 2 * time.Millisecond}
		var size int64
		for range n {
			s.lines = append(s.lines, []byte("not json\n"))
			size += int64(len("not json\n"))
		}
		return s, size
	}
	for _, c := range []struct {
		phase, prefix string
		run           func(r io.Reader, size int64, out io.Writer) error
	}{
		{"import", "import: ", func(r io.Reader, size int64, out io.Writer) error {
			_, err := importFrom(context.Background(), &apiClient{}, importOptions{batch: 500}, r, io.Discard, newProgress(out, size, false))
			return err
		}},
		{"strict check", "check: ", func(r io.Reader, size int64, out io.Writer) error {
			_, err := checkLines(context.Background(), r, "default", io.Discard, newCheckProgress(out, size, false))
			return err
		}},
	} {
		t.Run(c.phase, func(t *testing.T) {
			r, size := lines()
			var out strings.Builder
			if err := c.run(r, size, &out); err != nil {
				t.Fatal(err)
			}
			shown := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(shown) < 2 || !strings.HasPrefix(shown[len(shown)-1], c.prefix+"100% of the file, ") || !strings.Contains(shown[len(shown)-1], "150 bad lines") {
				t.Fatalf("progress of %d bad lines over %v:\n%s", n, time.Duration(n)*r.pause, out.String())
			}
			for _, l := range shown[:len(shown)-1] {
				if !strings.HasPrefix(l, c.prefix) || strings.Contains(l, "100%") {
					t.Fatalf("progress line %q", l)
				}
			}
		})
	}
}

// TestSmallFileShowsOneProgressLine: a file of a few bad lines, read at
// once, shows its final progress line alone.
func TestSmallFileShowsOneProgressLine(t *testing.T) {
	file := []byte("null\n[1,2]\n\"hi\"\n")
	var out strings.Builder
	if _, err := importFrom(context.Background(), &apiClient{}, importOptions{batch: 500}, bytes.NewReader(file), io.Discard, newProgress(&out, int64(len(file)), false)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "import: 100% of the file, 0 imported, 0 skipped, 3 bad lines") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("progress of a small file:\n%s", out.String())
	}
}

// TestStrictImportInterrupted: Ctrl-C during the --strict check of a large
// file stops it and says so, instead of checking to the end and reporting
// the bad lines.
func TestStrictImportInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.txt")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not json at all, a log line from somewhere else\n"), 400_000), 0o644); err != nil {
		t.Fatal(err)
	}
	// Held for the whole test, so a SIGINT sent before the command
	// listens, or after it stops listening, cannot end the test binary.
	held := make(chan os.Signal, 1)
	signal.Notify(held, os.Interrupt)
	defer signal.Stop(held)
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			}
		}
	}()
	start := time.Now()
	_, err := runRoot(t, "import", "--addr", refusedAddr(t), "--strict", "--realm", "g", path)
	close(stop)
	<-sent
	time.Sleep(50 * time.Millisecond) // the last signal, delivered
	if err == nil || err.Error() != "import interrupted while checking "+path+": nothing imported; run it again to import" {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
}
