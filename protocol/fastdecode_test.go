package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeReply holds the replies' fast path to encoding/json: what it decodes,
// encoding/json decodes the same, and what it gives up on it leaves zero. The seeds
// (run in every go test) are the engine's shapes and the corners of the fast path.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{
		`{"found":true,"value":"aGk="}`, `{"found":false,"value":null}`, `{"value":"","found":true}`,
		`{"set":true}`, `{"deleted":false}`, `{"exists":true}`, `{"content":"AAEC"}`, `{"content":null}`,
		`{"size":12,"modified_at":"2026-12-02T04:00:00.000000001Z"}`, `{"size":-0}`, `{"size":1e3}`,
		`{ "found" : true , "value" : "aGk=" } `, `{"found":tru}`, `{"found":truex}`, `{"found":null}`,
		`{"Found":true}`, `{"found":true,"found":false}`, `{"value":"aGk"}`, `{"value":nul}`,
		`{"error":{"code":"NOT_FOUND"}}`, `{"overflow":{"id":"x"}}`, `null`, `{}`, `[]`, `{"set":true}x`,
		`{"modified_at":"\u00e9"}`, "{\"modified_at\":\"\xff\"}", `{"size":0123}`,
		// base64 corners: escapes encoding/json undoes (base64 skips a newline), raw
		// newlines it refuses, an escaped quote, bytes outside the alphabet.
		`{"value":"aG\nk="}`, "{\"value\":\"aG\nk=\"}", "{\"value\":\"aG\rk=\"}", `{"value":"a\/8="}`,
		`{"value":"aGk\"="}`, "{\"value\":\"aG\tk=\"}", "{\"value\":\"aG\xffk=\"}", `{"value":"aGk=`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReply[KVGetReply](t, data)
		checkReply[KVSetReply](t, data)
		checkReply[KVDeleteReply](t, data)
		checkReply[KVExistsReply](t, data)
		checkReply[GetObjectReply](t, data)
		checkReply[ObjectMetadataReply](t, data)
	})
}

func checkReply[T any](t *testing.T, data []byte) {
	var viaJSON, fast T
	jsonErr := json.Unmarshal(data, &viaJSON)
	if any(&fast).(interface{ DecodeFast([]byte) bool }).DecodeFast(data) {
		if jsonErr != nil || !reflect.DeepEqual(fast, viaJSON) {
			t.Fatalf("%T %q: fast path %+v, encoding/json %+v (%v)", fast, data, fast, viaJSON, jsonErr)
		}
	} else if !reflect.DeepEqual(fast, *new(T)) {
		t.Fatalf("%T %q: the fast path gave up but left %+v", fast, data, fast)
	}
}

// TestRepliesTakeTheFastPath: what the engine writes, the SDK reads without
// encoding/json.
func TestRepliesTakeTheFastPath(t *testing.T) {
	for _, c := range []struct {
		reply interface{ AppendJSON([]byte) []byte }
		into  interface{ DecodeFast([]byte) bool }
	}{
		{KVGetReply{Found: true, Value: []byte("hi")}, new(KVGetReply)},
		{KVGetReply{}, new(KVGetReply)},
		{KVSetReply{Set: true}, new(KVSetReply)},
		{KVDeleteReply{Deleted: true}, new(KVDeleteReply)},
		{KVExistsReply{}, new(KVExistsReply)},
		{GetObjectReply{Content: []byte{0, 1}}, new(GetObjectReply)},
		{ObjectMetadataReply{Size: 7, ModifiedAt: "2026-12-02T04:00:00Z"}, new(ObjectMetadataReply)},
	} {
		body := c.reply.AppendJSON(nil)
		if !c.into.DecodeFast(body) {
			t.Errorf("%s: not taken by the fast path", body)
			continue
		}
		if got := reflect.ValueOf(c.into).Elem().Interface(); !reflect.DeepEqual(got, c.reply) {
			t.Errorf("%s: decoded %+v, want %+v", body, got, c.reply)
		}
	}
}
