package httpapi

import (
	"net/http"
	"strconv"
)

// Starting answers while the host starts its plugins, before the API is
// built: /healthz that the process is alive, /readyz that it is not ready
// yet, and every other request 503 unavailable with a Retry-After. The
// listening socket is bound first (a busy port fails before minutes of
// plugin start), so without it a client's connection was accepted and
// never answered until the slowest plugin had configured itself (two
// minutes, for one that hangs).
func Starting() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/healthz":
			_ = writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		case r.Method == http.MethodGet && r.URL.Path == "/readyz":
			_ = writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		default:
			// Carries its id as every other refusal does, so a client's
			// report of it can be matched to the host's log.
			reqID := requestID(r)
			w.Header().Set(HeaderRequestID, reqID)
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
			_ = writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: ErrorDetail{
				Code: "unavailable", Message: "memhost is starting its plugins; retry shortly", RequestID: reqID}})
		}
	})
}
