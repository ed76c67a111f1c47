package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// queryParameters are the query parameters each /v1 operation reads, as
// docs/openapi.yaml declares them; an operation not listed reads none.
var queryParameters = map[string][]string{
	"GET /v1/records":               {"realm", "scope", "q", "kind", "tag", "status", "trust", "since", "after", "limit"},
	"GET /v1/records/{id}":          {"realm"},
	"DELETE /v1/records/{id}":       {"realm"},
	"POST /v1/records/{id}/approve": {"realm", "target"},
	"POST /v1/records/{id}/reject":  {"realm"},
	"GET /v1/records/{id}/trace":    {"realm", "after", "limit"},
	"GET /v1/proposals":             {"realm", "after", "limit"},
	"GET /v1/scopes":                {"realm"},
	"GET /v1/traces":                {"realm", "after", "limit"},
	"GET /v1/sessions/{key}/trace":  {"realm", "identity", "after", "limit"},
	"DELETE /v1/conversations/{id}": {"realm", "identity"},
	"POST /mcp":                     {QueryIdentity, QueryRealm},
}

// maxParamName bounds a refused parameter's name as the answer quotes it.
const maxParamName = 64

// checkQuery reads a query string as strictly as a body: a parameter the
// operation does not read is refused, not ignored (a ?realm= on POST
// /v1/records would store the records in the default realm), and so is
// one given twice, of which the server would have to guess the one meant.
func checkQuery(pattern, rawQuery string) error {
	if rawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return &sdk.FieldError{Field: "query", Problem: fmt.Sprintf("is not a valid query string: %v", err), Err: sdk.ErrInvalid}
	}
	reads := queryParameters[pattern]
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name == "" {
			return &sdk.FieldError{Field: "query", Problem: "holds a parameter with no name (\"=value\" or a stray \"&\")", Err: sdk.ErrInvalid}
		}
		field := name
		if len(field) > maxParamName {
			field = strings.ToValidUTF8(field[:maxParamName], "") + "…"
		}
		if !slices.Contains(reads, name) {
			problem := "is not a query parameter of " + pattern
			if pattern == "POST /mcp" {
				// Said in words: "/mcp" reads as a file path, which
				// messages hide from clients.
				problem = "is not a query parameter of the MCP endpoint"
			}
			if len(reads) > 0 {
				problem += " (it reads " + strings.Join(reads, ", ") + ")"
			}
			return &sdk.FieldError{Field: field, Problem: problem, Err: sdk.ErrInvalid}
		}
		if n := len(q[name]); n > 1 {
			return &sdk.FieldError{Field: field, Problem: fmt.Sprintf("is given %d times; give it once", n), Err: sdk.ErrInvalid}
		}
		// Refused here, named as sent, rather than deeper under the name
		// of whatever field the value fills.
		if !utf8.ValidString(q.Get(name)) {
			return &sdk.FieldError{Field: field, Problem: "is not valid UTF-8", Err: sdk.ErrInvalid}
		}
		if strings.IndexByte(q.Get(name), 0) >= 0 {
			return &sdk.FieldError{Field: field, Problem: "holds a NUL byte", Err: sdk.ErrInvalid}
		}
	}
	return nil
}

// queryTime reads a time parameter by the rules of every time the API
// takes in a body (RFC 3339 with a two-digit hour and an offset within
// ±23:59, years 1-9999, not the zero time), which time.Parse is laxer
// than.
func queryTime(field, v string) (time.Time, error) {
	var t time.Time
	quoted, err := json.Marshal(v)
	if err == nil {
		err = strictjson.Decode(quoted, &t)
	}
	if err != nil {
		return time.Time{}, &sdk.FieldError{Field: field, Problem: fmt.Sprintf("%q is not an RFC 3339 time (2023-05-27T09:00:00Z)", v), Err: sdk.ErrInvalid}
	}
	if err := coordinator.CheckSentTime(field, t); err != nil {
		return time.Time{}, err
	}
	return t, nil
}
