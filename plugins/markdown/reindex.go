package markdown

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// ErrPartialTree marks a reindex that could not read part of the tree: it
// keeps the index it had rather than drop the records it could not see.
var ErrPartialTree = errors.New("markdown: part of the tree could not be read (see the log)")

// Reindex rebuilds the index of realm ("" for every realm) from the
// files, as a first open without a snapshot does: every record file is
// read, parsed and tokenized again, and the result replaces what the
// index held (so it also repairs an index that drifted from the files).
// It answers how many records the rebuilt realms hold (of every status;
// a file that is not a valid record is skipped and logged, as at open).
// progress, when not nil, hears done of total records: first 0 of the
// files found, and, as files turn out not to be records, a total that
// shrinks by them, so the last report is n of n.
//
// Writes wait while it runs; recall keeps answering from the old index
// until the new one is swapped in. A cancelled ctx leaves the old index;
// a reindex asked for while another runs waits for it, or for its ctx.
func (p *Provider) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	if realm != "" {
		if err := sdk.ValidateRealm(realm); err != nil {
			return 0, fmt.Errorf("markdown: reindex: %w", err)
		}
	}
	st, err := p.store(ctx)
	if err != nil {
		return 0, err
	}
	return st.reindex(ctx, realm, progress)
}

func (s *store) reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	if progress == nil {
		progress = func(int, int) {}
	}
	select {
	case s.reindexing <- struct{}{}:
		defer func() { <-s.reindexing }()
	case <-ctx.Done():
		return 0, ctxErr(ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := lister{root: s.root, visit: s.visitDir, log: s.log.Warn}
	l.list(target{realm: realm})
	s.noteLinks(target{realm: realm}, l.links)
	if len(l.failed) > 0 {
		return 0, ErrPartialTree
	}
	var cs []*change
	for _, ls := range l.out {
		old := s.realms[ls.realm] // read without idx: only holders of mu change it
		for id := range ls.files {
			c := &change{key: fileKey{ls.realm, ls.scope, id}}
			if old != nil {
				c.was = old.inScope(ls.scope, id)
			}
			cs = append(cs, c)
		}
	}
	total := len(cs)
	progress(0, total)
	fresh := map[string]*realmIndex{}
	bad := map[string]fileStamp{}
	count := 0
	for read := 0; read < total; {
		if err := ctx.Err(); err != nil {
			return 0, ctxErr(err)
		}
		n := min(total-read, applyChunk)
		chunk := cs[read : read+n]
		s.loadAll(chunk)
		s.applyChanges(fresh, bad, chunk)
		read += n
		count = 0
		for _, ri := range fresh {
			count += len(ri.byID)
		}
		// read-count files were not records: they leave the total.
		progress(count, total-(read-count))
	}
	s.loadVectors(fresh)
	s.idx.Lock()
	if realm == "" {
		s.realms, s.bad = fresh, bad
	} else {
		if ri := fresh[realm]; ri != nil {
			s.realms[realm] = ri
		} else {
			delete(s.realms, realm)
		}
		for rel := range s.bad {
			if strings.HasPrefix(rel, realm+"/") {
				delete(s.bad, rel)
			}
		}
		for rel, st := range bad {
			s.bad[rel] = st
		}
	}
	s.idx.Unlock()
	s.noteChange()
	return count, nil
}
