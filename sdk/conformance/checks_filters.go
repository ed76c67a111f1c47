package conformance

import (
	"context"
	"errors"
	"fmt"
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
