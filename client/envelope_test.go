package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/abi-engine/engine/protocol"
)

// FuzzOverflowEnvelope holds overflowEnvelope, with its cheap test in front, to the
// decoder alone: every body is an envelope to both or to neither.
func FuzzOverflowEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"overflow":{"id":"a.b","size":3}}`, `{ "Overflow" : {"id":"x"}}`, `{"OVERFLOW":{"id":"x"}}`,
		`{"\u006fverflow":{"id":"x"}}`, `{"overflo\"w":{"id":"x"}}`, `{"found":true,"value":"aGk="}`,
		`{"x":1,"overflow":{"id":"x"}}`, `{"overflow":{"id":"x"},"x":1}`, `{"overflow":null}`, `{}`, `{`,
		`{"overflow":{"id":"x"}} {}`, `{"overflow":{"id":""}}`, "{\t\"overflow\":{\"id\":\"x\"}}", `{"overflow`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotOK := overflowEnvelope(body)
		want, wantOK := decodeEnvelope(body)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: overflowEnvelope %+v %v, the decoder alone %+v %v", body, got, gotOK, want, wantOK)
		}
	})
}

// decodeEnvelope is overflowEnvelope without its cheap test.
func decodeEnvelope(body []byte) (*protocol.OverflowRef, bool) {
	if len(body) == 0 || body[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	var env protocol.OverflowEnvelope
	if err := dec.Decode(&env); err != nil || env.Overflow == nil || env.Overflow.ID == "" || dec.More() {
		return nil, false
	}
	return env.Overflow, true
}
