package main

import (
	"fmt"
	"io"
)

// benchOutput is a file bench writes its report or chart to (--out,
// --svg): written beside path and renamed over it by commit, so a run that
// is interrupted or fails before its report leaves what was at path (often
// the last run's report, under docs/) as it was. A report with nothing in
// it replaces nothing.
type benchOutput struct {
	out outputFile
	n   int64
}

func createBenchOutput(path string, warn io.Writer) (*benchOutput, error) {
	out, err := createOutputFile(path, warn)
	if err != nil {
		return nil, err
	}
	return &benchOutput{out: out}, nil
}

func (b *benchOutput) Write(p []byte) (int, error) {
	n, err := b.out.w.Write(p)
	b.n += int64(n)
	return n, err
}

func (b *benchOutput) commit() error {
	if b.n == 0 {
		b.out.discard()
		return nil
	}
	return b.out.commit()
}

func (b *benchOutput) discard() { b.out.discard() }

// writeWhole writes data to path as one benchOutput.
func writeWhole(path string, data []byte, warn io.Writer) error {
	f, err := createBenchOutput(path, warn)
	if err != nil {
		return err
	}
	defer f.discard()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return f.commit()
}
