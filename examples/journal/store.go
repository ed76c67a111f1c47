package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

// entry is one journal line: one acknowledged change, applied whole.
type entry struct {
	Op    string `json:"op"` // opPut, opForget or opSupersede
	Realm string `json:"realm"`
	// Records are the new records of a put, or the replacement of a
	// supersede.
	Records []sdk.Record `json:"records,omitempty"`
	// IDs are the records a forget removes.
	IDs []string `json:"ids,omitempty"`
	// Old is the record a supersede replaces.
	Old string `json:"old,omitempty"`
}

const (
	opPut       = "put"
	opForget    = "forget"
	opSupersede = "supersede"
)

// journal is the open journal file. Appends are serialised by the
// provider's lock.
type journal struct {
	f    *os.File
	size int64 // bytes of complete, acknowledged lines
}

// openJournal opens (creating) the journal at path and replays it. A last
// line without its newline is a write the plugin never acknowledged (it
// died mid-append): it is cut off. Any other bad line is corruption, and
// the journal is refused rather than half loaded.
func openJournal(path string, logger *slog.Logger) (*journal, map[string]*realm, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	realms, good, err := replay(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %s: %w", path, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if info.Size() > good {
		logger.Warn("cutting off an unacknowledged partial write", "path", path, "bytes", info.Size()-good)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: truncate %s: %w", path, err)
		}
	}
	return &journal{f: f, size: good}, realms, nil
}

// replay rebuilds the memory from a journal and answers the length of its
// complete lines.
func replay(r io.Reader) (map[string]*realm, int64, error) {
	realms := map[string]*realm{}
	br := bufio.NewReader(r)
	var good int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// A partial last line was never acknowledged.
			return realms, good, nil
		}
		if err != nil {
			return nil, 0, err
		}
		var e entry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, 0, fmt.Errorf("line %d is corrupt: %v", n, err)
		}
		if err := e.validate(); err != nil {
			return nil, 0, fmt.Errorf("line %d is corrupt: %v", n, err)
		}
		apply(realms, &e)
		good += int64(len(line))
	}
}

// validate checks an entry read back from disk, which a person may have
// edited, so that applying it keeps every invariant.
func (e *entry) validate() error {
	if err := sdk.ValidateRealm(e.Realm); err != nil {
		return err
	}
	for i := range e.Records {
		r := &e.Records[i]
		if err := r.Validate(); err != nil {
			return err
		}
		if r.ID == "" || r.Realm != e.Realm || r.ContentHash != sdk.ContentHash(r.Title, r.Body) {
			return fmt.Errorf("record %d lacks an id, its realm or a matching content hash", i)
		}
	}
	for _, id := range e.IDs {
		if err := sdk.ValidateID(id); err != nil {
			return err
		}
	}
	switch e.Op {
	case opPut, opForget:
	case opSupersede:
		if len(e.Records) != 1 || sdk.ValidateID(e.Old) != nil {
			return fmt.Errorf("supersede needs one replacement and the old id")
		}
	default:
		return fmt.Errorf("unknown op %q", e.Op)
	}
	return nil
}

// append writes e as one line and fsyncs it: only then is the change
// acknowledged. A failed append is cut off so the journal stays whole.
func (j *journal) append(ctx context.Context, e *entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	line = append(line, '\n')
	// The write and its sync are the commit, which nothing interrupts:
	// a call whose deadline passed while the line was made stops here,
	// so its caller's deadline_exceeded stays true.
	if err := sdk.ContextErr(ctx); err != nil {
		return err
	}
	_, werr := j.f.Write(line)
	if werr == nil {
		werr = j.f.Sync()
	}
	if werr != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			return fmt.Errorf("journal: append failed (%v) and could not be undone: %v: %w", werr, terr, sdk.ErrUnavailable)
		}
		return fmt.Errorf("journal: append: %v: %w", werr, sdk.ErrUnavailable)
	}
	j.size += int64(len(line))
	return nil
}

func (j *journal) close() error {
	if err := j.f.Sync(); err != nil {
		j.f.Close()
		return err
	}
	return j.f.Close()
}

// realm is one tenant's memory.
type realm struct {
	docs map[string]*doc
	// content indexes ids by scope and content hash, for idempotent writes.
	content map[string][]string
}

func contentKey(scope sdk.Scope, hash string) string { return string(scope) + "\x00" + hash }

func (rm *realm) put(r sdk.Record) {
	if old, ok := rm.docs[r.ID]; ok {
		rm.unindex(old)
	}
	rm.docs[r.ID] = newDoc(r)
	k := contentKey(r.Scope, r.ContentHash)
	rm.content[k] = append(rm.content[k], r.ID)
}

func (rm *realm) remove(id string) {
	if d, ok := rm.docs[id]; ok {
		rm.unindex(d)
		delete(rm.docs, id)
	}
}

func (rm *realm) unindex(d *doc) {
	k := contentKey(d.rec.Scope, d.rec.ContentHash)
	rm.content[k] = slices.DeleteFunc(rm.content[k], func(id string) bool { return id == d.rec.ID })
	if len(rm.content[k]) == 0 {
		delete(rm.content, k)
	}
}

// doc is a record with its terms, cut once at write time.
type doc struct {
	rec   sdk.Record
	title map[string]bool
	body  map[string]bool
	tags  map[string]bool
}

func newDoc(r sdk.Record) *doc {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, t := range tokenize.Terms(s) {
			m[t] = true
		}
		return m
	}
	// memhost's own tags are markers, not the record's text (index.TagText).
	return &doc{rec: r, title: set(r.Title), body: set(r.Body), tags: set(index.TagText(r.Tags))}
}

func realmOf(realms map[string]*realm, name string) *realm {
	rm := realms[name]
	if rm == nil {
		rm = &realm{docs: map[string]*doc{}, content: map[string][]string{}}
		realms[name] = rm
	}
	return rm
}

// apply makes an acknowledged entry part of the memory. It is the one
// place state changes, used both live and on replay, so a restart always
// rebuilds exactly what was acknowledged.
func apply(realms map[string]*realm, e *entry) {
	rm := realmOf(realms, e.Realm)
	switch e.Op {
	case opPut:
		for _, r := range e.Records {
			rm.put(r)
		}
	case opForget:
		for _, id := range e.IDs {
			rm.remove(id)
		}
	case opSupersede:
		repl := e.Records[0]
		if old, ok := rm.docs[e.Old]; ok {
			old.rec.Status = sdk.StatusSuperseded
			old.rec.UpdatedAt = repl.CreatedAt
		}
		rm.put(repl)
	}
}

// findContent answers the id of a recallable record of scope holding the
// same content, or "". Writes are idempotent against those only: content
// that was forgotten, superseded or has expired is stored anew.
func (rm *realm) findContent(scope sdk.Scope, hash string, now time.Time) string {
	for _, id := range rm.content[contentKey(scope, hash)] {
		if rm.docs[id].rec.Recallable(now) {
			return id
		}
	}
	return ""
}
