package endpoint

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

func TestRedact(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	for _, c := range []struct{ name, in, key, want string }{
		{"no key", "anything", "", "anything"},
		{"whole", "bad key " + key + " here", key, "bad key [redacted] here"},
		{"masked", "Incorrect API key provided: sk-live-01****cdef", key, "Incorrect API key provided: [redacted]****cdef"},
		{"cut short", "key sk-live-012", key, "key [redacted]"},
		{"a run inside another word", "x456789abcy", key, "x[redacted]y"},
		{"too short a run", "sk-live", key, "sk-live"},
		{"a short key hidden whole", "model ollama at ollama:11434", "ollama", "model [redacted] at [redacted]:11434"},
		{"twice", key + "," + key, key, "[redacted],[redacted]"},
		{"twice, apart", "key sk-0123456789 twice sk-0123456789", "sk-0123456789", "key [redacted] twice [redacted]"},
		{"a tail", "tail 23456789!", "sk-0123456789", "tail [redacted]!"},
		{"a short run left", "short 0123 is left", "sk-0123456789", "short 0123 is left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Redact(c.in, c.key); got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestRedirectTargetNamesSchemeAndHostOnly(t *testing.T) {
	resp := &http.Response{Header: http.Header{"Location": {"https://elsewhere.example:8443/v1/chat?key=secret"}},
		Request: &http.Request{URL: &url.URL{Scheme: "http", Host: "model.local"}}}
	if got := RedirectTarget(resp); got != "https://elsewhere.example:8443" {
		t.Errorf("RedirectTarget = %q", got)
	}
	if got := RedirectTarget(&http.Response{Header: http.Header{}}); got != "no Location" {
		t.Errorf("RedirectTarget without a Location = %q", got)
	}
}

func TestTransportCauseDropsMethodAndURL(t *testing.T) {
	cause := errors.New("connection refused")
	err := &url.Error{Op: "Post", URL: "http://model.local/v1/embeddings", Err: cause}
	if got := TransportCause(err); got != cause {
		t.Errorf("TransportCause = %v", got)
	}
	if got := TransportCause(cause); got != cause {
		t.Errorf("TransportCause of a plain error = %v", got)
	}
}
