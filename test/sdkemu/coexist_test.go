package sdkemu_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// codecCoexistence is case h: a JSON client and a protobuf client take turns on the
// same subjects and the same key; every JSON reply is byte for byte the one
// docs/protocol.md (2.1) shows.
func (f *fixture) codecCoexistence(t *testing.T) {
	token := f.token(t, f.secret, "json-client", time.Now())
	jsonCall := func(op, body, want string) {
		t.Helper()
		msg, err := f.nc.RequestMsgWithContext(ctxFor(t), &nats.Msg{Subject: kv(op), Data: []byte(body),
			Header: nats.Header{sdkemu.HeaderToken: {token}}})
		if err != nil {
			t.Fatalf("JSON %s: %v", op, err)
		}
		if string(msg.Data) != want {
			t.Errorf("JSON %s %s: reply %s, want %s", op, body, msg.Data, want)
		}
		noErrorHeaders(t, "JSON "+op, msg.Header)
	}
	jsonCall("set", `{"key":"h/k","value":"djE="}`, `{}`)
	var got kvv1.GetResponse
	rep := call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "h/k"}, &got)
	wantBytes(t, "protobuf get of a JSON set", rep.Body, "0a027631")
	call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "h/k", Value: []byte("v2")}, &kvv1.SetResponse{})
	jsonCall("get", `{"key":"h/k"}`, `{"found":true,"value":"djI="}`)
	rep = call(t, f.sdk, kv("set_if_not_exists"), &kvv1.SetIfNotExistsRequest{Key: "h/k", Value: []byte("x")}, &kvv1.SetIfNotExistsResponse{})
	wantBytes(t, "protobuf set_if_not_exists", rep.Body, "0800")
	jsonCall("set_if_not_exists", `{"key":"h/k","value":"eA=="}`, `{"set":false}`)
	jsonCall("exists", `{"key":"h/k"}`, `{"exists":true}`)
	jsonCall("delete", `{"key":"h/k"}`, `{"deleted":true}`)
	refused(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "h/k"}, &kvv1.GetResponse{}, "KV_NOT_FOUND", false)
	jsonCall("get", `{"key":"h/k"}`, `{"found":false,"value":null}`)
	jsonCall("delete", `{"key":"h/k"}`, `{"deleted":false}`)
	refused(t, f.sdk, kv("delete"), &kvv1.DeleteRequest{Key: "h/k"}, &kvv1.DeleteResponse{}, "KV_NOT_FOUND", false)
}

// srvInfo is case i: micro's INFO of both services names them, version 1.0.0, every
// endpoint on abi.svc.<service>.v1.<operation> in queue group q.
func (f *fixture) srvInfo(t *testing.T) {
	for _, svc := range []struct {
		name string
		ops  []string
	}{
		{"keyvalue", []string{"delete", "delete_if_value_matches", "exists", "get", "get_ttl", "list_keys", "set", "set_if_not_exists"}},
		{"object_storage", []string{"delete_object", "get_object", "get_object_metadata", "list_objects", "list_objects_recursive", "put_object"}},
	} {
		msg, err := f.nc.RequestWithContext(ctxFor(t), "$SRV.INFO."+svc.name, nil)
		if err != nil {
			t.Fatalf("$SRV.INFO.%s: %v", svc.name, err)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatalf("$SRV.INFO.%s: %v: %s", svc.name, err, msg.Data)
		}
		if info.Name != svc.name || info.Version != "1.0.0" {
			t.Errorf("$SRV.INFO.%s: name %q version %q", svc.name, info.Name, info.Version)
		}
		var ops []string
		for _, ep := range info.Endpoints {
			ops = append(ops, ep.Name)
			if want := "abi.svc." + svc.name + ".v1." + ep.Name; ep.Subject != want || ep.QueueGroup != "q" {
				t.Errorf("%s endpoint %s: subject %q queue group %q, want %q and q", svc.name, ep.Name, ep.Subject, ep.QueueGroup, want)
			}
		}
		slices.Sort(ops)
		if !slices.Equal(ops, svc.ops) {
			t.Errorf("%s endpoints %q, want %q", svc.name, ops, svc.ops)
		}
	}
}
