package httpapi

import (
	"errors"
	"fmt"
	"net/http"
)

// DefaultMaxInFlight bounds a token's requests in flight when its block
// sets no max_in_flight: well above what one agent runtime's turns need,
// low enough that a flood from one token waits in front of another
// token's request for at most that many calls.
const DefaultMaxInFlight = 64

// codeTooManyRequests (429, with Retry-After) refuses a request beyond its
// token's max_in_flight.
const codeTooManyRequests = "too_many_requests"

var errTooManyInFlight = errors.New("too many requests in flight")

// admit counts calls, the calls a request runs at once (one, or the
// messages of an MCP batch), against its token's bound and answers the
// release to call once it has been answered. Beyond the bound the request
// is refused at once rather than queued: a queue would hold the flood's
// connections and memory as well as delay it, and a client that backs off
// on 429 is what the bound asks for. A server without tokens has one
// caller, the host's own processes, and no bound.
func (s *Server) admit(w http.ResponseWriter, c caller, calls int) (release func(), err error) {
	if c.token == nil {
		return func() {}, nil
	}
	load := &s.inFlight[c.slot]
	if load.Add(int64(calls)) > int64(c.token.MaxInFlight) {
		load.Add(-int64(calls))
		w.Header().Set("Retry-After", "1")
		if calls > 1 {
			return nil, fmt.Errorf("token %q may have %d requests in flight (its max_in_flight), and this batch's %d more calls would take it over; send fewer at a time, or once some are answered: %w", c.token.Name, c.token.MaxInFlight, calls, errTooManyInFlight)
		}
		return nil, fmt.Errorf("token %q already has %d requests in flight, its max_in_flight; send this one once one of them is answered: %w", c.token.Name, c.token.MaxInFlight, errTooManyInFlight)
	}
	return func() { load.Add(-int64(calls)) }, nil
}
