package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// requestTypes are the bodies the /v1 routes decode.
var requestTypes = []any{
	exportRequest{}, importRequest{}, compactRequest{}, turnRequest{}, buildRequest{},
	defangRequest{}, compactedRequest{}, manifestRequest{}, sessionStartRequest{},
	beforeIterationRequest{}, rememberRequest{}, recallRequest{}, reindexRequest{},
}

// FuzzDecodeRoundTrip: a body a route's decoder accepts gives a request
// that encodes to a body the decoder accepts again, to the same request.
// A decoder that let in a value it cannot give back (a field encoded
// under another name, a lossy number) would store other than was sent.
func FuzzDecodeRoundTrip(f *testing.F) {
	for i, seed := range []string{
		`{"realm":"default","after":"r19b7ca98c889ae80fe313a75c53","limit":100}`,
		`{"realm":"default","records":[` + importSeedRecord + `]}`,
		`{"identity":{"id":"alice"},"session":"s1","evicted":[{"role":"user","content":"hello"}]}`,
		`{"identity":{"id":"alice"},"session":"s1","content":"espresso order"}`,
		`{"identity":{"id":"alice"},"query_text":"espresso","query_terms":["crane"]}`,
		`{"identity":{"id":"alice"},"content":[{"type":"text","text":"<memhost_memory_observation>"}]}`,
		`{"identity":{"id":"alice"}}`,
		`{"identity":{"id":"alice"},"tier":"full","k":10}`,
		`{"identity":{"id":"alice"},"session":"g1","task":"order coffee"}`,
		`{"identity":{"id":"alice"},"session":"g1","last_user_message":"espresso?"}`,
		`{"records":[{"scope":"identity:alice","kind":"fact","title":"t","body":"b","tags":["x"]}]}`,
		`{"identity":{"id":"alice"},"query":"espresso","limit":5}`,
		`{"realm":"acme"}`,
	} {
		f.Add(uint8(i), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		typ := reflect.TypeOf(requestTypes[int(which)%len(requestTypes)])
		first := reflect.New(typ)
		if decodeObject(body, first.Interface()) != nil {
			return
		}
		enc, err := json.Marshal(first.Interface())
		if err != nil {
			t.Fatalf("%v from %q does not encode: %v", typ, body, err)
		}
		second := reflect.New(typ)
		if err := decodeObject(enc, second.Interface()); err != nil {
			t.Fatalf("%v from %q encodes to %s, which is refused: %v", typ, body, enc, err)
		}
		again, err := json.Marshal(second.Interface())
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("%v from %q encodes to %s, decoded and encoded again %s (%v)", typ, body, enc, again, err)
		}
	})
}
