//go:build unix

package markdown

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAFIFOForAVectorFileDoesNotBlock: a vector file's path was checked
// for a link, then read through the path, so a FIFO there (or put there
// between the two) blocked the store for ever, waiting for a writer. It
// is opened without waiting and refused as no vector file.
func TestAFIFOForAVectorFileDoesNotBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "default.vec")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := readVectors(path)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errBadVectors) {
			t.Fatalf("a FIFO read as a vector file: %v, want it refused as no vector file", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reading a FIFO as a vector file still waited after a minute")
	}
}
