package protocol

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// EncodeRequest and DecodeReply give what encoding/json gives, by the fast path for
// this package's types and by encoding/json for anything else.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	for _, req := range []any{
		KVSetRequest{Ctx: Ctx{Context: &RequestContext{TimeoutMS: 5}}, Key: "k", Value: []byte("v"), TTLSeconds: 1.5},
		map[string]string{"key": "k"}, // no appender: encoding/json
	} {
		got, err := EncodeRequest(req)
		want, _ := json.Marshal(req)
		if err != nil || string(got) != string(want) {
			t.Errorf("EncodeRequest(%+v) = %s, %v; want %s", req, got, err, want)
		}
	}
	for _, body := range []string{`{"found":true,"value":"dg=="}`, `{"Found":true,"value":"dg=="}`} {
		var got, want KVGetReply
		if err := DecodeReply([]byte(body), &got); err != nil {
			t.Fatalf("DecodeReply(%s): %v", body, err)
		}
		_ = json.Unmarshal([]byte(body), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeReply(%s) = %+v, encoding/json %+v", body, got, want)
		}
	}
	var m map[string]any
	if err := DecodeReply([]byte(`{"a":1}`), &m); err != nil || m["a"] != 1.0 {
		t.Errorf("DecodeReply into a map = %v, %v", m, err)
	}
	if err := DecodeReply([]byte(`{"found":`), new(KVGetReply)); err == nil {
		t.Error("DecodeReply took a truncated body")
	}
	if _, err := EncodeRequest(KVSetRequest{Key: "k", TTLSeconds: math.NaN()}); err == nil {
		t.Error("EncodeRequest took a TTL that is not a number")
	}
}
