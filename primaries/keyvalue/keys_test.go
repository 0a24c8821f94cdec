package keyvalue_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// TestListKeysAndGetTTL drives list_keys and get_ttl in both codecs and pins the
// protobuf replies' bytes: pages with next_after, a TTL in whole seconds rounded up,
// unset for a key that never expires, KV_NOT_FOUND for a missing key, the Python
// engine's limit message; and the JSON replies' members.
func TestListKeysAndGetTTL(t *testing.T) {
	clock := kvtest.NewClock()
	nc := serveService(t, keyvalue.Service(memory.New(memory.WithNow(clock.Now))), withTokens(t))
	tok := mint(t, testSecret, "sdk-ci", time.Now())
	ttl := int64(60)
	for _, k := range []string{"c", "a", "b"} {
		wantBytes(t, "set "+k, pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Key: k, Value: []byte("v")}), "", "")
	}
	wantBytes(t, "set with a ttl", pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Key: "t", Value: []byte("v"), Ttl: &ttl}), "", "")

	after := "t"
	wantBytes(t, "list_keys after the last key", pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{Limit: 5, After: &after}), "", "")
	wantBytes(t, "list_keys, first page", pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{Context: ctxOf(), Limit: 2}),
		"12 01 61 12 01 62 1a 01 62", "")
	after = "b"
	wantBytes(t, "list_keys, last page", pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{Limit: 2, After: &after}),
		"12 01 63 12 01 74", "")
	wantBytes(t, "list_keys by prefix", pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{Prefix: "b", Limit: 1000}), "12 01 62", "")
	wantError(t, pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{}), &kvv1.ListKeysResponse{},
		protocol.InvalidArgument, "limit must be between 1 and 1000, got 0")
	wantError(t, pbCall(t, nc, protocol.OpListKeys, tok, &kvv1.ListKeysRequest{Limit: 1001}), &kvv1.ListKeysResponse{},
		protocol.InvalidArgument, "limit must be between 1 and 1000, got 1001")

	wantBytes(t, "get_ttl right after the set", pbCall(t, nc, protocol.OpGetTTL, tok, &kvv1.GetTtlRequest{Context: ctxOf(), Key: "t"}), "10 3c", "")
	clock.Advance(20*time.Second + time.Millisecond)
	wantBytes(t, "get_ttl rounds up", pbCall(t, nc, protocol.OpGetTTL, tok, &kvv1.GetTtlRequest{Key: "t"}), "10 28", "")
	wantBytes(t, "get_ttl of a key that never expires", pbCall(t, nc, protocol.OpGetTTL, tok, &kvv1.GetTtlRequest{Key: "a"}), "", "")
	wantBytes(t, "get_ttl of a missing key", pbCall(t, nc, protocol.OpGetTTL, tok, &kvv1.GetTtlRequest{Key: "m"}),
		"0a 20 0a 0c"+hex.EncodeToString([]byte("KV_NOT_FOUND"))+"12 10"+hex.EncodeToString([]byte("Key not found: m")), "KV_NOT_FOUND")

	json := func(op, body, want string) {
		t.Helper()
		rep := rawCall(t, nc, op, tok, []byte(body))
		if string(rep.Data) != want {
			t.Errorf("%s %s: %s, want %s", op, body, rep.Data, want)
		}
	}
	json(protocol.OpListKeys, `{"prefix":"","limit":2}`, `{"keys":["a","b"],"next_after":"b"}`)
	json(protocol.OpListKeys, `{"prefix":"","limit":2,"after":"b"}`, `{"keys":["c","t"]}`)
	json(protocol.OpListKeys, `{"prefix":"zz","limit":2}`, `{"keys":[]}`)
	json(protocol.OpGetTTL, `{"key":"t"}`, `{"found":true,"ttl_seconds":40}`)
	json(protocol.OpGetTTL, `{"key":"a"}`, `{"found":true,"ttl_seconds":0}`)
	json(protocol.OpGetTTL, `{"key":"m"}`, `{"found":false,"ttl_seconds":0}`)
	clock.Advance(40 * time.Second)
	wantBytes(t, "get_ttl of an expired key", pbCall(t, nc, protocol.OpGetTTL, tok, &kvv1.GetTtlRequest{Key: "t"}),
		"0a 20 0a 0c"+hex.EncodeToString([]byte("KV_NOT_FOUND"))+"12 10"+hex.EncodeToString([]byte("Key not found: t")), "KV_NOT_FOUND")
	json(protocol.OpListKeys, `{"prefix":"","limit":1000}`, `{"keys":["a","b","c"]}`)
	m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, protocol.OpListKeys))
	m.Data = []byte(`{"prefix":""}`)
	m.Header.Set(protocol.HeaderAuthToken, tok)
	rep, err := nc.RequestMsg(m, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":{"code":"INVALID_ARGUMENT","message":"limit must be between 1 and 1000, got 0","retryable":false}}`; string(rep.Data) != want {
		t.Errorf("JSON list_keys without a limit: %s, want %s", rep.Data, want)
	}
}
