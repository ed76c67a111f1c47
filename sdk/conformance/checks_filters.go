package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// checkBadFilters: a recall filter is held to the rules of a record's
// tags. A NUL byte, invalid UTF-8 or a blank tag in tags or exclude_tags
// is refused as sdk.ErrInvalid naming the filter's element, never passed
// to the store (a database refuses a NUL with an error of its own).
func checkBadFilters(ctx context.Context, e *env) error {
	var p problems
	for _, bad := range []string{"red\x00", "\xff\xfe", " "} {
		for _, field := range []string{"tags", "exclude_tags"} {
			q := sdk.RecallQuery{Realm: realmA, Query: commonWord}
			if field == "tags" {
				q.Tags = []string{"red", bad}
			} else {
				q.ExcludeTags = []string{"red", bad}
			}
			what := fmt.Sprintf("Recall with %s [red %q]", field, bad)
			_, err := e.p.Recall(ctx, q)
			if werr := wantErr(what, err, sdk.ErrInvalid); werr != nil {
				p.add(werr)
				continue
			}
			// A FieldError names it; text protobuf cannot carry (invalid
			// UTF-8) is refused before the call, in a message naming it.
			var fe *sdk.FieldError
			want := field + "[1]"
			if named := errors.As(err, &fe) && fe.Field == want || strings.Contains(err.Error(), want); !named {
				p.addf("%s: error %q does not name the field %s", what, err, want)
			}
		}
	}
	// A time window that holds no instant is a mistake, not an empty
	// answer.
	at := time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, w := range [][2]time.Time{{at, at}, {at, at.Add(-time.Hour)}} {
		_, err := e.p.Recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord, Since: w[0], Until: w[1]})
		p.add(wantErr(fmt.Sprintf("Recall with since %s and until %s", w[0].Format(time.RFC3339), w[1].Format(time.RFC3339)), err, sdk.ErrInvalid))
	}
	return p.err()
}

// checkSystemTags: memhost's system tags (memhost:user on a turn the
// user spoke, memhost:assistant, memhost:proposal; index.SystemTagPrefix)
// filter as any tag does, case-folded, but are not text: a query of their
// words finds no record through them. Were they text, every turn the user
// spoke would match "user". (Whether an ordinary tag's words rank is the
// provider's choice; the Go SDK's providers rank them.)
func checkSystemTags(ctx context.Context, e *env) error {
	user, _ := e.record(scopeAlice)
	user.Tags = []string{"memhost:user"}
	assistant, _ := e.record(scopeAlice)
	assistant.Tags = []string{"MEMHOST:Assistant", "memhost:user-facing"}
	plain, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, user, assistant, plain)
	if err != nil {
		return err
	}
	var p problems
	for _, tc := range []struct {
		query, tag, notTag string
		want               []string // nil: none of the tagged records
	}{
		{"user", "", "", nil},
		{"assistant", "", "", nil},
		{"memhost user assistant facing", "", "", nil},
		{commonWord, "memhost:user", "", ids[:1]},
		{commonWord, "Memhost:ASSISTANT", "", ids[1:2]},
		{commonWord, "", "memhost:user", ids[1:]},
	} {
		q, what := tagQuery(tc.query, tc.tag, tc.notTag)
		hits, err := e.recall(ctx, q)
		if err != nil {
			p.addf("%s: %v", what, err)
			continue
		}
		got := hitIDs(hits)
		switch {
		case tc.want == nil && (slices.Contains(got, ids[0]) || slices.Contains(got, ids[1])):
			p.addf("%s answered %v: the records %v match it only through their system tags, which are not text", what, got, ids[:2])
		case tc.want != nil && !sameSet(got, tc.want):
			p.addf("%s answered %v, want %v (of %v)", what, got, tc.want, ids)
		}
	}
	return p.err()
}

// checkTagFolding: tags compare case-folded letter by letter, as
// strings.EqualFold does (Record.HasTag): "STRAẞE" is "Straße" and "SUN"
// is "ſun", but "STRASSE" is not "Straße". A provider that folds whole
// strings (ß as "ss") filters other records than the host expects.
func checkTagFolding(ctx context.Context, e *env) error {
	sharp, _ := e.record(scopeAlice)
	sharp.Tags = []string{"Straße"}
	long, _ := e.record(scopeAlice)
	long.Tags = []string{"\u017fun"}
	ids, err := e.remember(ctx, realmA, sharp, long)
	if err != nil {
		return err
	}
	var p problems
	for _, tc := range []struct {
		tag, notTag string
		want        []string
	}{
		{"STRA\u1e9eE", "", ids[:1]},
		{"STRASSE", "", []string{}},
		{"SUN", "", ids[1:]},
		{"", "STRASSE", ids},
		{"", "stra\u1e9ee", ids[1:]},
	} {
		q, what := tagQuery(commonWord, tc.tag, tc.notTag)
		hits, err := e.recall(ctx, q)
		if err != nil {
			p.addf("%s: %v", what, err)
			continue
		}
		if got := hitIDs(hits); !sameSet(got, tc.want) {
			p.addf("%s answered %v, want %v (of %v, tagged %q and %q)", what, got, tc.want, ids, sharp.Tags[0], long.Tags[0])
		}
	}
	return p.err()
}

// tagQuery answers a recall of query in realmA that requires tag and
// excludes notTag (each when not empty), and how to name it.
func tagQuery(query, tag, notTag string) (sdk.RecallQuery, string) {
	q := sdk.RecallQuery{Realm: realmA, Query: query, Limit: listLimit}
	what := fmt.Sprintf("Recall(%q)", query)
	if tag != "" {
		q.Tags = []string{tag}
		what += fmt.Sprintf(" with tag %q", tag)
	}
	if notTag != "" {
		q.ExcludeTags = []string{notTag}
		what += fmt.Sprintf(" without tag %q", notTag)
	}
	return q, what
}
