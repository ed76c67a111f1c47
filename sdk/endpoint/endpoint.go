// Package endpoint is what a plugin calling a model's HTTP endpoint (an
// OpenAI-compatible API, as the llm compactor and the openai embedder do)
// needs to keep its key and its errors in hand: redirects are not
// followed, so the key and the texts go nowhere the config did not name;
// the key is redacted from whatever an error shows, however the endpoint
// echoed it; and a transport failure is quoted without the method and URL
// the caller already names.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// NoRedirects is an http.Client's CheckRedirect that follows none: the
// 3xx answer itself is returned.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// RedirectTarget names where a 3xx answer points, by scheme and host only
// (the rest of a Location may carry anything), or "no Location".
func RedirectTarget(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return "no Location"
	}
	return (&url.URL{Scheme: loc.Scheme, Host: loc.Host}).String()
}

// Shown is raw, a configured endpoint URL, as an error may quote it:
// without its userinfo, query and fragment, where credentials travel
// (user:pass@, a gateway's ?key=). A string that does not parse is
// shown as "": its credentials cannot be told from the rest.
func Shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// TransportCause is a failed request's cause without the method and URL
// the transport's error names again.
func TransportCause(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// MinRedacted is the shortest run of the key's characters Redact hides: a
// cut or masked echo may hold only part of the key, and a part this long
// is still worth hiding (a shorter key is hidden whole).
const MinRedacted = 8

// Redact replaces in s the key and every run of MinRedacted or more of
// its consecutive characters with [redacted]. Gateways echo the key they
// refused, escaped in JSON, masked or cut short, so the text is redacted
// as it is shown, after decoding and cutting.
func Redact(s, key string) string {
	if key == "" {
		return s
	}
	least := min(MinRedacted, len(key))
	hide := make([]bool, len(s))
	found := false
	for i := range len(s) {
		for j := range len(key) {
			k := 0
			for i+k < len(s) && j+k < len(key) && s[i+k] == key[j+k] {
				k++
			}
			if k >= least {
				found = true
				for x := i; x < i+k; x++ {
					hide[x] = true
				}
			}
		}
	}
	if !found {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !hide[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("[redacted]")
		for i+1 < len(s) && hide[i+1] {
			i++
		}
	}
	return b.String()
}

// ContextError is the error of a call its context ended: sdk.ErrDeadline
// for a deadline (the context's own text would say it again beside it),
// else the context's cause, unavailable (the caller went away).
func ContextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return sdk.ErrDeadline
	}
	return fmt.Errorf("%v: %w", err, sdk.ErrUnavailable)
}
