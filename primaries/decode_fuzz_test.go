package primaries

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// decodeSeeds are the seed corpus of FuzzDecodeRequest: the SDK's shapes and the
// corner cases of the fast path and the strict one. They run in every go test.
var decodeSeeds = []string{
	`{"context":{"timeout_ms":10000},"key":"bench-key"}`,
	`{"context":{"trace_id":"t","timeout_ms":1},"key":"k","value":"aGk=","ttl_seconds":3}`,
	`{"key":"a","value":"","ttl_seconds":0.5}`,
	`{ "key" : "a" , "value" : "aGk=" }`,
	`{"prefix":"p","key":"k","content":"AAEC"}`,
	`{"key":"a","key":"b","context":{"timeout_ms":1},"context":{"trace_id":"x"}}`,
	`{"KEY":"a"}`, `{"Key":"a","key":"b"}`, `{"value":[104,105]}`, `{"key":"\u00e9\n"}`,
	`{"ttl_seconds":-0}`, `{"ttl_seconds":1e400}`, `{"context":{"timeout_ms":123456789012345678901}}`,
	`{"context":null,"key":null,"value":null}`, `null`, `[]`, `{}`, `{"key":"a"} x`, "{\"key\":\"\xff\"}",
	`{"key":"a","x":{"KEY":1}}`, `{"context":{"timeout_ms":01}}`, `{"value":"aGk"}`,
	`{"key":"a","value":"aG\nk="}`, "{\"key\":\"a\",\"value\":\"aG\nk=\"}", `{"key":"a","value":"aGk\"="}`,
	`{"key":"\ud800"}`, `{"key":"\udbff"}`, `{"key":"\udc00x"}`, `{"key":"\ud83d\ude00"}`, `{"key":"\\ud800"}`,
	`{"key":"\ud800\ud800\udc00"}`, `{"\udfff":1,"key":"a"}`, `{"context":{"trace_id":"\uDBFF"}}`, `{"prefix":"\ud800\u0041"}`,
}

// FuzzDecodeRequest holds the fast path and the strict decoder to encoding/json: what
// the fast path decodes, encoding/json decodes the same; what the strict decoder
// accepts, encoding/json accepts and decodes the same; and what encoding/json accepts
// but the strict decoder refuses is a member that differs from a known one only in
// case, bytes given as an array, or a string with an escaped lone surrogate, which the
// strict decoder never accepts.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode[protocol.KVKeyRequest](t, data)
		checkDecode[protocol.KVSetRequest](t, data)
		checkDecode[protocol.KVValueRequest](t, data)
		checkDecode[protocol.ObjectRequest](t, data)
		checkDecode[protocol.PutObjectRequest](t, data)
		checkDecode[protocol.ListObjectsRequest](t, data)
	})
}

func checkDecode[T any](t *testing.T, data []byte) {
	var viaJSON, fast, strict T
	jsonErr := json.Unmarshal(data, &viaJSON)
	if any(&fast).(fastDecoder).DecodeFast(data) {
		if jsonErr != nil || !reflect.DeepEqual(fast, viaJSON) {
			t.Fatalf("%T %q: fast path %+v, encoding/json %+v (%v)", fast, data, fast, viaJSON, jsonErr)
		}
	} else if !reflect.DeepEqual(fast, *new(T)) {
		t.Fatalf("%T %q: the fast path gave up but left %+v", fast, data, fast)
	}
	// The same with a spare for the context member (Handle's call frame): the same
	// result, in the spare when there is a context member, nil when there is none.
	var spared T
	spare := &protocol.RequestContext{TraceID: "left over", TimeoutMS: 7}
	any(&spared).(ctxHolder).RequestCtx().Context = spare
	if any(&spared).(fastDecoder).DecodeFast(data) {
		got := any(&spared).(ctxHolder).RequestCtx().Context
		if !reflect.DeepEqual(spared, fast) || (got != nil && got != spare) {
			t.Fatalf("%T %q: with a spare %+v (context %p, spare %p), without %+v", spared, data, spared, got, spare, fast)
		}
	} else if !reflect.DeepEqual(spared, *new(T)) {
		t.Fatalf("%T %q: the fast path with a spare gave up but left %+v", spared, data, spared)
	}
	strictErr := Decode(data, &strict)
	if esc, lone := loneSurrogate(data); strictErr == nil && lone {
		t.Fatalf("%T %q: strict accepted the lone surrogate %s", strict, data, esc)
	}
	switch {
	case strictErr == nil && (jsonErr != nil || !reflect.DeepEqual(strict, viaJSON)):
		t.Fatalf("%T %q: strict %+v, encoding/json %+v (%v)", strict, data, strict, viaJSON, jsonErr)
	case strictErr != nil && jsonErr == nil && utf8.Valid(data): // invalid UTF-8 is refused on purpose
		msg := strictErr.Error()
		if !strings.Contains(msg, "case-sensitive") && !strings.Contains(msg, "base64 string, got an array") && !strings.Contains(msg, "lone surrogate") {
			t.Fatalf("%T %q: strict refused what encoding/json took (%+v): %v", strict, data, viaJSON, strictErr)
		}
	}
}
