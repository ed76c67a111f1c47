package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// TestImportFitsTheServersBodyLimit: records whose JSON grows when
// re-encoded ("<" escaped as \u003c) and a server whose body limit is
// below the import's batches still import completely: the batches fit,
// and a 413 splits a batch instead of ending the import.
func TestImportFitsTheServersBodyLimit(t *testing.T) {
	t.Parallel()
	var file bytes.Buffer
	const n = 80
	for i := range n {
		r := archiveLine(i, sdk.StatusActive)
		r.Supersedes = ""
		r.Body = strings.Repeat("<a & b>", 8000) // 56 kB, 176 kB with HTML escaped
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		line, _ := json.Marshal(r)
		file.Write(bytes.ReplaceAll(line, []byte(`\u003c`), []byte("<")))
		file.WriteByte('\n')
	}
	for _, c := range []struct{ name, config string }{
		{"default limit", ""},
		{"limit below a batch", "server {\n  max_body_bytes = 400000\n}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "angles.jsonl")
			if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			m := startMemhost(t, markdownConfig+c.config)
			if imp, skip := importCounts(t, append(cliAddr(m), path)...); imp != n || skip != 0 {
				t.Fatalf("imported %d, skipped %d; want %d, 0", imp, skip, n)
			}
		})
	}
}

// TestImportFromStandardInput: "-" reads standard input, as export's "-"
// writes standard output, so an export pipes into an import.
func TestImportFromStandardInput(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	var file bytes.Buffer
	for i := range 3 {
		line, _ := json.Marshal(archiveLine(i, sdk.StatusActive))
		file.Write(append(line, '\n'))
	}
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), append([]string{"import"}, append(cliAddr(m), "-")...)...)
	cmd.Stdin = &file
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "imported 3 records") {
		t.Fatalf("import from standard input: %v\n%s", err, out)
	}
}

// TestTagFlagsKeepQuotes: --tag is not a CSV list; a tag's quotes are kept
// as given, and commas still separate tags.
func TestTagFlagsKeepQuotes(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	id, err := runCLI(t, nil, append([]string{"remember", "--scope", "identity:alice", "--title", "Quoted", "--body", "tags with quotes",
		"--tag", `"vip"`, "--tag", `say "hi"`, "--tag", "a,b"}, cliAddr(m)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rec sdk.Record
	if code := m.do("GET", "/v1/records/"+strings.TrimSpace(id), nil, &rec); code != 200 {
		t.Fatalf("GET the record = %d", code)
	}
	if want := []string{`"vip"`, `say "hi"`, "a", "b"}; strings.Join(rec.Tags, "|") != strings.Join(want, "|") {
		t.Fatalf("stored tags %q, want %q", rec.Tags, want)
	}
	out, err := runCLI(t, nil, append([]string{"recall", "--identity", "alice", "--tag", `say "hi"`, "tags with quotes"}, cliAddr(m)...)...)
	if err != nil || !strings.Contains(out, strings.TrimSpace(id)) {
		t.Fatalf("recall by a quoted tag = %q, %v", out, err)
	}
}

// TestProposalsDecisionSummary: the summary of failed decisions is
// spelled right for both verbs.
func TestProposalsDecisionSummary(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	for verb, want := range map[string]string{"approve": "1 of 1 proposals were not approved", "reject": "1 of 1 proposals were not rejected"} {
		if _, err := runCLI(t, nil, append([]string{"proposals", verb, "nosuch"}, cliAddr(m)...)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("proposals %s of an unknown id: %v, want %q", verb, err, want)
		}
	}
}

// TestInterruptedArchiveCommands: SIGINT during an export, an import or a
// reindex ends the command with a plain error (not killed by the signal):
// the export leaves FILE as it was, the import says how to resume, the
// reindex that the old index stays.
func TestInterruptedArchiveCommands(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 4)
	hung := hungServer(t, arrived)
	addr := strings.TrimPrefix(hung.URL, "http://")
	dir := t.TempDir()
	records := filepath.Join(dir, "records.jsonl")
	writeArchive(t, records, 10)
	backup := filepath.Join(dir, "backup.jsonl")
	if err := os.WriteFile(backup, []byte("the last good backup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"export", []string{"export", "--addr", addr, backup}, backup + " left as it was: export interrupted after 0 records"},
		{"import", []string{"import", "--addr", addr, records}, "import interrupted: run it again to resume"},
		{"reindex", []string{"reindex", "--addr", addr}, "reindex interrupted: the rebuild is canceled and the old index stays"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-arrived:
			case err := <-done:
				t.Fatalf("%s ended before its request reached the server: %v\n%s", c.name, err, stderr.String())
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			err := <-done
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("%s after SIGINT: %v, want exit status 1\n%s", c.name, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("%s after SIGINT said:\n%s\nwant %q", c.name, stderr.String(), c.want)
			}
		})
	}
	if got, _ := os.ReadFile(backup); string(got) != "the last good backup\n" {
		t.Fatalf("the interrupted export changed the file: %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("files left in the directory: %v", entries)
	}
}

// TestExportKeepsAnActiveRecordASuccessorNames: a record the store holds
// active is written active into FILE, though another record names it in
// supersedes (an import stores records as given, a markdown file may be
// edited back to active): only a record the store superseded while the
// export ran is written superseded. Before, the file turned it superseded,
// so a restore from it dropped the record out of recall.
func TestExportKeepsAnActiveRecordASuccessorNames(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	kept, namer := archiveLine(1, sdk.StatusActive), archiveLine(2, sdk.StatusActive)
	namer.Supersedes = kept.ID
	var src bytes.Buffer
	for _, r := range []sdk.Record{kept, namer} {
		line, _ := json.Marshal(r)
		src.Write(append(line, '\n'))
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, src.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if imp, _ := importCounts(t, append(cliAddr(m), in)...); imp != 2 {
		t.Fatalf("imported %d, want 2", imp)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	if _, err := runCLI(t, nil, append(append([]string{"export"}, cliAddr(m)...), out)...); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src.Bytes()) {
		t.Fatalf("the export differs from what the store holds:\n got %s\nwant %s", got, src.Bytes())
	}
}

// TestExportOnAFullDiskSaysItOnce: an export that meets a full disk says
// so by FILE (or standard output) and the problem, as its refusal to
// create the temporary file already did; it read "x.jsonl not written:
// write /dir/.x.jsonl.partial-524688930: no space left on device".
func TestExportOnAFullDiskSaysItOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "small")
	mountTmpfs(t, dir, 64<<10)
	body := strings.Repeat("a full disk ", 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var page struct {
			Records []sdk.Record `json:"records"`
		}
		for i := range 100 {
			page.Records = append(page.Records, sdk.Record{ID: fmt.Sprintf("r%03d", i), Realm: "default", Scope: "realm", Kind: sdk.KindFact, Title: "t", Body: body, Status: sdk.StatusActive})
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	out := filepath.Join(dir, "out.jsonl")

	_, err := runCLI(t, nil, "export", "--addr", addr, out)
	want := "memhost: " + out + " not written: no space left on device\n"
	if err == nil || !strings.HasSuffix(err.(*cliError).stderr, want) {
		t.Fatalf("export to a full disk: %v, want stderr %q", err, want)
	}

	f, err := os.Create(filepath.Join(dir, "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "export", "--addr", addr)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err == nil || !strings.HasSuffix(stderr.String(), "memhost: standard output: no space left on device\n") {
		t.Fatalf("export to a full standard output: %v, stderr %q", err, stderr.String())
	}
}

// TestImportStoppedByTheServerSaysHowToResume: an import the server stops
// partway (its disk full, say) after storing batches says that running it
// again resumes, as an interrupted one does; it said only the server's
// "storage_full: ..." though the operator's next step is the same rerun.
func TestImportStoppedByTheServerSaysHowToResume(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Records []json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if calls.Add(1) == 1 {
			_ = json.NewEncoder(w).Encode(sdk.ImportResult{Imported: len(req.Records)})
			return
		}
		w.WriteHeader(http.StatusInsufficientStorage)
		_, _ = w.Write([]byte(`{"error":{"code":"storage_full","message":"the disk is full"}}`))
	}))
	t.Cleanup(srv.Close)
	records := filepath.Join(t.TempDir(), "records.jsonl")
	writeArchive(t, records, 10)
	_, err := runCLI(t, nil, "import", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--batch", "4", records)
	want := "memhost: storage_full: the disk is full\nThe import stopped there: once that is fixed, run it again to resume (what is stored is skipped)\n"
	if err == nil || !strings.HasSuffix(err.(*cliError).stderr, want) {
		t.Fatalf("import stopped by the server: %v, want stderr ending %q", err, want)
	}
}
