package main

import (
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
)

// TestCallNewOperations: call reaches list_keys, get_ttl and list_objects_recursive
// of a serving engine and prints their JSON replies.
func TestCallNewOperations(t *testing.T) {
	srv := natstest.Start(t)
	servingEngine(t, srv.URL())
	call := func(service, op, body string) string {
		t.Helper()
		r := runCLI(t, nil, "call", service, op, body, "--nats", srv.URL())
		wantCode(t, r, exitOK)
		return strings.TrimSpace(r.stdout)
	}
	call("keyvalue", "set", `{"key":"a","value":"dg=="}`)
	call("keyvalue", "set", `{"key":"b","value":"dg==","ttl_seconds":30}`)
	if got, want := call("keyvalue", "list_keys", `{"prefix":"","limit":1}`), `{"keys":["a"],"next_after":"a"}`; got != want {
		t.Errorf("list_keys: %s, want %s", got, want)
	}
	if got, want := call("keyvalue", "get_ttl", `{"key":"b"}`), `{"found":true,"ttl_seconds":30}`; got != want {
		t.Errorf("get_ttl: %s, want %s", got, want)
	}
	call("object_storage", "put_object", `{"prefix":"p/q","key":"k","content":"eA=="}`)
	if got, want := call("object_storage", "list_objects_recursive", `{"prefix":"p"}`), `{"keys":["q/k"]}`; got != want {
		t.Errorf("list_objects_recursive: %s, want %s", got, want)
	}
}
