package httpapi

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// writeHits answers a recall: {"hits":[...]} as writeJSON would encode it,
// byte for byte (TestAppendHitsMatchesEncodingJSON), but appended by hand:
// encoding/json's reflection over ten records, their four times each, was
// a measurable share of the host's CPU per recall. What this encoder does
// not cover (a score that is not a number, a year outside 0..9999, which
// encoding/json refuses) goes to writeJSON, which answers as it always did:
// it returns the refusal for the route to answer 500.
func writeHits(w http.ResponseWriter, hits []sdk.Hit) error {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	out, ok := appendHits(buf.AvailableBuffer(), hits)
	if !ok {
		return writeJSON(w, http.StatusOK, recallResponse{Hits: hits})
	}
	buf.Write(out)
	writeBuffer(w, http.StatusOK, buf)
	return nil
}

// recallResponse is the body of a recall's answer.
type recallResponse struct {
	Hits []sdk.Hit `json:"hits"`
}

// appendHits appends the JSON of recallResponse{hits} and a line feed, as
// json.Encoder with HTML escaping off writes it; ok is false when a value
// is one encoding/json would refuse.
func appendHits(b []byte, hits []sdk.Hit) (_ []byte, ok bool) {
	b = append(b, `{"hits":[`...)
	for i := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendHit(b, &hits[i]); !ok {
			return nil, false
		}
	}
	return append(b, "]}\n"...), true
}

func appendHit(b []byte, h *sdk.Hit) ([]byte, bool) {
	r := &h.Record
	b = append(b, `{"record":{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"realm":`...)
	b = appendJSONString(b, r.Realm)
	b = append(b, `,"scope":`...)
	b = appendJSONString(b, string(r.Scope))
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(r.Kind))
	b = append(b, `,"title":`...)
	b = appendJSONString(b, r.Title)
	if r.Description != "" {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, r.Description)
	}
	b = append(b, `,"body":`...)
	b = appendJSONString(b, r.Body)
	if len(r.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range r.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
	}
	b = append(b, `,"trust":`...)
	b = appendJSONString(b, string(r.Trust))
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(r.Status))
	if r.Supersedes != "" {
		b = append(b, `,"supersedes":`...)
		b = appendJSONString(b, r.Supersedes)
	}
	var ok bool
	b = append(b, `,"created_at":`...)
	if b, ok = appendJSONTime(b, r.CreatedAt); !ok {
		return nil, false
	}
	b = append(b, `,"updated_at":`...)
	if b, ok = appendJSONTime(b, r.UpdatedAt); !ok {
		return nil, false
	}
	if !r.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		if b, ok = appendJSONTime(b, r.ExpiresAt); !ok {
			return nil, false
		}
	}
	b = append(b, `,"content_hash":`...)
	b = appendJSONString(b, r.ContentHash)
	b = append(b, `,"use_count":`...)
	b = strconv.AppendInt(b, r.UseCount, 10)
	if !r.LastUsedAt.IsZero() {
		b = append(b, `,"last_used_at":`...)
		if b, ok = appendJSONTime(b, r.LastUsedAt); !ok {
			return nil, false
		}
	}
	if r.Thread != nil {
		b = append(b, `,"thread":{"id":`...)
		b = appendJSONString(b, r.Thread.ID)
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, r.Thread.Seq, 10)
		b = append(b, '}')
	}
	if !r.OccurredAt.IsZero() {
		b = append(b, `,"occurred_at":`...)
		if b, ok = appendJSONTime(b, r.OccurredAt); !ok {
			return nil, false
		}
	}
	b = append(b, `},"score":`...)
	if b, ok = appendJSONFloat(b, h.Score); !ok {
		return nil, false
	}
	return append(b, '}'), true
}

// appendJSONTime appends t as time.Time's MarshalJSON does; false for a
// year it refuses.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendJSONFloat appends f as encoding/json does a float64; false for
// NaN and the infinities, which it refuses.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json does with HTML
// escaping off: quote, backslash and control bytes escaped, invalid UTF-8
// as U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
