package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
	kvjs "github.com/abi-engine/engine/primaries/keyvalue/jetstream"
	objjs "github.com/abi-engine/engine/primaries/objectstorage/jetstream"
	"github.com/abi-engine/engine/protocol"
)

// callOnce sends one request (no SDK retry) and returns the error of its reply, nil
// when it succeeded.
func callOnce(t *testing.T, nc *nats.Conn, service, op string, body any) *protocol.Error {
	t.Helper()
	data, _ := json.Marshal(body)
	m, err := nc.Request(protocol.ServiceSubject(service, op), data, 10*time.Second)
	if err != nil {
		t.Fatalf("%s.%s: %v", service, op, err)
	}
	if m.Header.Get(protocol.HeaderErrorCode) == "" {
		return nil
	}
	var env protocol.Envelope
	if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
		t.Fatalf("%s.%s: an error reply without an envelope: %s", service, op, m.Data)
	}
	return env.Error
}

// TestFencedWritesAreRefusedAndCounted: the engine's primaries adopt the epoch in the
// shared backends; once another engine advanced them past it, the engine's writes are
// refused by storage (UNAVAILABLE, retryable, naming the bucket and the epochs),
// counted in abi_engine_fenced_writes_total and not as backend errors, and its reads
// still answer.
func TestFencedWritesAreRefusedAndCounted(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "jetstream"))
	load(t, e)
	nc := natstest.Connect(t, srv.URL())
	if werr := callOnce(t, nc, protocol.KeyValue, protocol.OpSet, protocol.KVSetRequest{Key: "k", Value: []byte("v")}); werr != nil {
		t.Fatalf("set while current: %v", werr)
	}

	// Another engine takes the buckets to a far newer epoch.
	const newer = 1_000_000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := kvjs.New(ctx, j, kvjs.Config{Bucket: kvjs.DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := objjs.New(ctx, j, objjs.Config{Bucket: objjs.DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.AdoptEpoch(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if err := obj.AdoptEpoch(ctx, newer); err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		werr := callOnce(t, nc, protocol.KeyValue, protocol.OpSet, protocol.KVSetRequest{Key: "k", Value: []byte("stale")})
		if werr == nil || werr.Code != protocol.Unavailable || !werr.Retryable ||
			!strings.Contains(werr.Message, kvjs.DefaultBucket) || !strings.Contains(werr.Message, "epoch 1000000") {
			t.Fatalf("stale set %d answered %+v, want UNAVAILABLE, retryable, naming the bucket and its epoch", i, werr)
		}
	}
	werr := callOnce(t, nc, protocol.ObjectStorage, protocol.OpPutObject, protocol.PutObjectRequest{Key: "o", Content: []byte("stale")})
	if werr == nil || werr.Code != protocol.Unavailable || !werr.Retryable || !strings.Contains(werr.Message, objjs.DefaultBucket) {
		t.Fatalf("stale put_object answered %+v", werr)
	}
	if v, found, err := kv.Get(ctx, "k"); err != nil || !found || string(v) != "v" {
		t.Fatalf("the stale set changed the key: %q %v %v", v, found, err)
	}
	if werr := callOnce(t, nc, protocol.KeyValue, protocol.OpGet, protocol.KVKeyRequest{Key: "k"}); werr != nil {
		t.Fatalf("a read of the fenced engine: %v", werr)
	}

	body := scrape(t, e)
	for _, want := range []string{
		`abi_engine_fenced_writes_total{backend="jetstream",service="keyvalue"} 3`,
		`abi_engine_fenced_writes_total{backend="jetstream",service="object_storage"} 1`,
		// A fenced write is no backend failure: the backend answered.
		`abi_engine_backend_errors_total{backend="jetstream",service="keyvalue"} 0`,
		`abi_engine_backend_errors_total{backend="jetstream",service="object_storage"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
