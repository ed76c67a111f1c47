package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// reportFile is a file bench writes whole or not at all: a temporary file
// beside path that commit renames over it, so a run that is interrupted,
// fails before its report or cannot finish writing it leaves what was at
// path (often last run's report, under docs/) as it was.
type reportFile struct {
	*os.File
	path string
	done bool
}

func newReportFile(path string) (*reportFile, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return &reportFile{File: f, path: path}, nil
}

// commit puts what was written at path; a report with nothing in it (a run
// stopped before writing) replaces nothing.
func (r *reportFile) commit() error {
	if r.done {
		return nil
	}
	r.done = true
	st, err := r.Stat()
	if err == nil && st.Size() == 0 {
		r.Close()
		return os.Remove(r.Name())
	}
	if err == nil {
		err = r.Chmod(0o644)
	}
	if err == nil {
		err = r.Sync()
	}
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(r.Name(), r.path)
	}
	if err != nil {
		os.Remove(r.Name())
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err // it names the temporary file, not the report
		}
		return fmt.Errorf("cannot write %s: %w", r.path, err)
	}
	return nil
}

// discard removes the temporary file unless commit has put it in place.
func (r *reportFile) discard() {
	if r.done {
		return
	}
	r.done = true
	r.Close()
	os.Remove(r.Name())
}

// writeWhole writes data to path as one reportFile.
func writeWhole(path string, data []byte) error {
	f, err := newReportFile(path)
	if err != nil {
		return err
	}
	defer f.discard()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return f.commit()
}
