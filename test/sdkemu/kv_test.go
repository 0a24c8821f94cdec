package sdkemu_test

import (
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// kvRoundTrip is case a: set, get, exists, set_if_not_exists on a live key (08 00),
// delete_if_value_matches wrong then right, an empty value (0a 00); and what the
// client puts on the wire, seen by a subscriber beside the engine.
func (f *fixture) kvRoundTrip(t *testing.T) {
	spy := natstest.Connect(t, f.srv.URL())
	seen := make(chan *nats.Msg, 1)
	sub, err := spy.ChanSubscribe(kv("set"), seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	req := &kvv1.SetRequest{Key: "a/k", Value: []byte("v")}
	rep := call(t, f.sdk, kv("set"), req, &kvv1.SetResponse{})
	wantBytes(t, "set", rep.Body, "")
	msg := testwait.Recv(t, seen, 10*time.Second, "the set seen by the spy")
	_ = sub.Unsubscribe()
	if req.Context != nil {
		t.Errorf("the caller's request was changed: context %v", req.Context)
	}
	var keys []string
	for k := range msg.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != 2 || keys[0] != sdkemu.HeaderOverflow || keys[1] != sdkemu.HeaderToken || msg.Header.Get(sdkemu.HeaderOverflow) != "1" {
		t.Errorf("request headers %v, want exactly %s: 1 and %s", msg.Header, sdkemu.HeaderOverflow, sdkemu.HeaderToken)
	}
	var sent kvv1.SetRequest
	if err := proto.Unmarshal(msg.Data, &sent); err != nil {
		t.Fatal(err)
	}
	if c := sent.GetContext(); c.GetTimeoutMs() != 10000 || len(c.GetTraceId()) != 36 {
		t.Errorf("sent context %v, want timeout_ms 10000 and a 36-character trace_id", c)
	}
	if msg.Data[0] != 0x0a {
		t.Errorf("a request starts with byte %#x, want 0x0a (its context)", msg.Data[0])
	}

	var got kvv1.GetResponse
	rep = call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "a/k"}, &got)
	wantBytes(t, "get", rep.Body, "0a0176")
	var ex kvv1.ExistsResponse
	rep = call(t, f.sdk, kv("exists"), &kvv1.ExistsRequest{Key: "a/k"}, &ex)
	wantBytes(t, "exists", rep.Body, "0801")
	rep = call(t, f.sdk, kv("set_if_not_exists"), &kvv1.SetIfNotExistsRequest{Key: "a/k", Value: []byte("x")}, &kvv1.SetIfNotExistsResponse{})
	wantBytes(t, "set_if_not_exists on a live key", rep.Body, "0800")
	rep = call(t, f.sdk, kv("delete_if_value_matches"), &kvv1.DeleteIfValueMatchesRequest{Key: "a/k", Value: []byte("w")}, &kvv1.DeleteIfValueMatchesResponse{})
	wantBytes(t, "delete_if_value_matches, wrong value", rep.Body, "0800")
	rep = call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "a/k"}, &got)
	wantBytes(t, "get after the refused writes", rep.Body, "0a0176")
	rep = call(t, f.sdk, kv("delete_if_value_matches"), &kvv1.DeleteIfValueMatchesRequest{Key: "a/k", Value: []byte("v")}, &kvv1.DeleteIfValueMatchesResponse{})
	wantBytes(t, "delete_if_value_matches, right value", rep.Body, "0801")
	rep = call(t, f.sdk, kv("exists"), &kvv1.ExistsRequest{Key: "a/k"}, &ex)
	wantBytes(t, "exists after the delete", rep.Body, "0800")

	call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "a/empty", Value: nil}, &kvv1.SetResponse{})
	rep = call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "a/empty"}, &got)
	wantBytes(t, "get of an empty value", rep.Body, "0a00")
	if _, ok := got.GetResult().(*kvv1.GetResponse_Value); !ok {
		t.Errorf("get of an empty value: the oneof is not set (%v): the SDK would return None", got.GetResult())
	}
}

// kvMisses is case b: get, delete and get_ttl of a missing key are KV_NOT_FOUND in the
// reply message; a one-second TTL expires; get_ttl rounds up; list_keys pages.
func (f *fixture) kvMisses(t *testing.T) {
	e := refused(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "b/nope"}, &kvv1.GetResponse{}, "KV_NOT_FOUND", false)
	if e.Message != "Key not found: b/nope" {
		t.Errorf("get of a missing key: message %q", e.Message)
	}
	refused(t, f.sdk, kv("delete"), &kvv1.DeleteRequest{Key: "b/nope"}, &kvv1.DeleteResponse{}, "KV_NOT_FOUND", false)
	refused(t, f.sdk, kv("get_ttl"), &kvv1.GetTtlRequest{Key: "b/nope"}, &kvv1.GetTtlResponse{}, "KV_NOT_FOUND", false)

	ttl := func(n int64) *int64 { return &n }
	call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "b/60", Value: []byte("v"), Ttl: ttl(60)}, &kvv1.SetResponse{})
	var left kvv1.GetTtlResponse
	call(t, f.sdk, kv("get_ttl"), &kvv1.GetTtlRequest{Key: "b/60"}, &left)
	if left.Seconds == nil || left.GetSeconds() < 1 || left.GetSeconds() > 60 {
		t.Errorf("get_ttl of a 60 s key: %v, want seconds in [1, 60]", &left)
	}
	call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "b/forever", Value: []byte("v")}, &kvv1.SetResponse{})
	call(t, f.sdk, kv("get_ttl"), &kvv1.GetTtlRequest{Key: "b/forever"}, &left)
	if left.Seconds != nil {
		t.Errorf("get_ttl of a key without TTL: seconds set to %d, want unset", left.GetSeconds())
	}

	call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "b/1s", Value: []byte("v"), Ttl: ttl(1)}, &kvv1.SetResponse{})
	call(t, f.sdk, kv("get_ttl"), &kvv1.GetTtlRequest{Key: "b/1s"}, &left)
	if left.GetSeconds() != 1 {
		// Rounded up: a live key with a TTL never reads 0. Only a key already gone
		// would answer otherwise, and that is KV_NOT_FOUND, an error above.
		t.Errorf("get_ttl of a 1 s key: %v, want 1", &left)
	}
	testwait.For(t, 10*time.Second, "the 1 s key to expire", func() bool {
		var ex kvv1.ExistsResponse
		call(t, f.sdk, kv("exists"), &kvv1.ExistsRequest{Key: "b/1s"}, &ex)
		return !ex.GetOkValue()
	})
	refused(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "b/1s"}, &kvv1.GetResponse{}, "KV_NOT_FOUND", false)

	for _, k := range []string{"b/list/c", "b/list/a", "b/list/b"} {
		call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: k, Value: []byte("v")}, &kvv1.SetResponse{})
	}
	var page kvv1.ListKeysResponse
	call(t, f.sdk, kv("list_keys"), &kvv1.ListKeysRequest{Prefix: "b/list/", Limit: 2}, &page)
	if got := page.GetKeys(); len(got) != 2 || got[0] != "b/list/a" || got[1] != "b/list/b" || page.GetNextAfter() != "b/list/b" || page.NextAfter == nil {
		t.Errorf("first page: %v", &page)
	}
	after := page.GetNextAfter()
	call(t, f.sdk, kv("list_keys"), &kvv1.ListKeysRequest{Prefix: "b/list/", Limit: 2, After: &after}, &page)
	if got := page.GetKeys(); len(got) != 1 || got[0] != "b/list/c" || page.NextAfter != nil {
		t.Errorf("last page: %v", &page)
	}
	e = refused(t, f.sdk, kv("list_keys"), &kvv1.ListKeysRequest{Prefix: "b/list/"}, &kvv1.ListKeysResponse{}, "INVALID_ARGUMENT", false)
	if e.Message != "limit must be between 1 and 1000, got 0" {
		t.Errorf("list_keys limit 0: message %q", e.Message)
	}
}

// auth is case c: no token, an empty one, one that is not a JWT, one signed with
// another secret and an expired one are UNAUTHENTICATED, retryable false, and nothing
// is stored; a body that is not protobuf is INVALID_ARGUMENT.
func (f *fixture) auth(t *testing.T) {
	body, err := proto.Marshal(&kvv1.SetRequest{Key: "c/k", Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string][]string{
		"no token":           nil,
		"empty token":        {""},
		"not a JWT":          {"not-a-jwt"},
		"wrong secret":       {f.token(t, []byte("not the engine's secret, same size!!!!"), "sdk-ci", time.Now())},
		"expired":            {f.token(t, f.secret, "sdk-ci", time.Now().Add(-2*time.Hour))},
		"issued in a minute": {f.token(t, f.secret, "sdk-ci", time.Now().Add(time.Minute))},
	}
	for name, tok := range tokens {
		h := nats.Header{sdkemu.HeaderOverflow: {"1"}}
		if tok != nil {
			h[sdkemu.HeaderToken] = tok
		}
		msg, err := f.nc.RequestMsgWithContext(ctxFor(t), &nats.Msg{Subject: kv("set"), Header: h, Data: body})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		noErrorHeaders(t, name, msg.Header)
		var rep kvv1.SetResponse
		if err := proto.Unmarshal(msg.Data, &rep); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e := rep.GetError(); e.GetCode() != "UNAUTHENTICATED" || e.GetRetryable() || e.GetMessage() != "missing or invalid auth token" {
			t.Errorf("%s: error %v, want UNAUTHENTICATED \"missing or invalid auth token\", retryable false", name, e)
		}
		if got := msg.Header.Get(sdkemu.HeaderErrorCode); got != "UNAUTHENTICATED" {
			t.Errorf("%s: %s = %q", name, sdkemu.HeaderErrorCode, got)
		}
	}
	// The transport refuses what the SDK refuses, before sending.
	if _, err := sdkemu.New(f.nc, sdkemu.Static(""), time.Second).Call(ctxFor(t), kv("get"), &kvv1.GetRequest{Key: "c/k"}, &kvv1.GetResponse{}); err != sdkemu.ErrBadToken {
		t.Errorf("an empty token: %v, want the transport's refusal", err)
	}
	var ex kvv1.ExistsResponse
	call(t, f.sdk, kv("exists"), &kvv1.ExistsRequest{Key: "c/k"}, &ex)
	if ex.GetOkValue() {
		t.Error("a refused set stored its key")
	}

	msg, err := f.nc.RequestMsgWithContext(ctxFor(t), &nats.Msg{Subject: kv("set"), Data: []byte{0xff},
		Header: nats.Header{sdkemu.HeaderToken: {f.token(t, f.secret, "sdk-ci", time.Now())}, sdkemu.HeaderOverflow: {"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	noErrorHeaders(t, "body ff", msg.Header)
	var rep kvv1.SetResponse
	if err := proto.Unmarshal(msg.Data, &rep); err != nil {
		t.Fatal(err)
	}
	if e := rep.GetError(); e.GetCode() != "INVALID_ARGUMENT" || e.GetRetryable() {
		t.Errorf("body ff: error %v, want INVALID_ARGUMENT, retryable false", e)
	}
}
