package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// The typed clients have the method sets of the engine's backends, so a client-role
// engine can hand them to its modules.
var (
	_ keyvalue.Store      = (*KeyValue)(nil)
	_ objectstorage.Store = (*ObjectStorage)(nil)
)

// memEngine serves keyvalue and object_storage from maps over the payload structs, the
// way an engine's primaries do, on plain queue subscriptions.
type memEngine struct {
	t        *testing.T
	mu       sync.Mutex
	kv       map[string][]byte
	objects  map[string]memObject
	contexts []*protocol.RequestContext
	ttls     []float64
	calls    atomic.Int32
	now      time.Time
}

type memObject struct {
	content  []byte
	modified time.Time
}

func startMemEngine(t *testing.T, nc *nats.Conn) *memEngine {
	e := &memEngine{
		t:       t,
		kv:      map[string][]byte{},
		objects: map[string]memObject{},
		now:     time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC),
	}
	ops := map[string]func(body []byte) (any, *protocol.Error){
		protocol.OpGet:                  e.kvGet,
		protocol.OpSet:                  e.kvSet,
		protocol.OpSetIfNotExists:       e.kvSetIfNotExists,
		protocol.OpDelete:               e.kvDelete,
		protocol.OpDeleteIfValueMatches: e.kvDeleteIfValueMatches,
		protocol.OpExists:               e.kvExists,
	}
	for op, h := range ops {
		e.serve(nc, protocol.ServiceSubject(protocol.KeyValue, op), h)
	}
	for op, h := range map[string]func(body []byte) (any, *protocol.Error){
		protocol.OpPutObject:         e.putObject,
		protocol.OpGetObject:         e.getObject,
		protocol.OpDeleteObject:      e.deleteObject,
		protocol.OpListObjects:       e.listObjects,
		protocol.OpGetObjectMetadata: e.getObjectMetadata,
	} {
		e.serve(nc, protocol.ServiceSubject(protocol.ObjectStorage, op), h)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *memEngine) serve(nc *nats.Conn, subject string, h func([]byte) (any, *protocol.Error)) {
	if _, err := nc.QueueSubscribe(subject, "q", func(m *nats.Msg) {
		e.calls.Add(1)
		var c protocol.Ctx
		if err := json.Unmarshal(m.Data, &c); err != nil {
			replyError(e.t, m, protocol.Errorf(protocol.InvalidArgument, "request is not JSON: %v", err))
			return
		}
		e.mu.Lock()
		e.contexts = append(e.contexts, c.Context)
		out, perr := h(m.Data)
		e.mu.Unlock()
		if perr != nil {
			replyError(e.t, m, perr)
			return
		}
		body, err := json.Marshal(out)
		if err != nil {
			e.t.Error(err)
			return
		}
		reply(e.t, m, body)
	}); err != nil {
		e.t.Fatal(err)
	}
}

func decode[T any](body []byte) (T, *protocol.Error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return v, protocol.Errorf(protocol.InvalidArgument, "request: %v", err)
	}
	return v, nil
}

func checkKey(key string) *protocol.Error {
	if key == "" {
		return protocol.Errorf(protocol.InvalidArgument, "key is empty")
	}
	return nil
}

func (e *memEngine) kvGet(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVKeyRequest](body)
	if perr != nil {
		return nil, perr
	}
	if perr := checkKey(r.Key); perr != nil {
		return nil, perr
	}
	v, ok := e.kv[r.Key]
	return protocol.KVGetReply{Found: ok, Value: v}, nil
}

func (e *memEngine) kvSet(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVSetRequest](body)
	if perr != nil {
		return nil, perr
	}
	if perr := checkKey(r.Key); perr != nil {
		return nil, perr
	}
	if r.Value == nil {
		return nil, protocol.Errorf(protocol.InvalidArgument, "key %q: value is missing", r.Key)
	}
	e.kv[r.Key] = r.Value
	e.ttls = append(e.ttls, r.TTLSeconds)
	return protocol.Empty{}, nil
}

func (e *memEngine) kvSetIfNotExists(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVSetRequest](body)
	if perr != nil {
		return nil, perr
	}
	if perr := checkKey(r.Key); perr != nil {
		return nil, perr
	}
	if _, ok := e.kv[r.Key]; ok {
		return protocol.KVSetReply{Set: false}, nil
	}
	e.kv[r.Key] = r.Value
	e.ttls = append(e.ttls, r.TTLSeconds)
	return protocol.KVSetReply{Set: true}, nil
}

func (e *memEngine) kvDelete(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVKeyRequest](body)
	if perr != nil {
		return nil, perr
	}
	_, ok := e.kv[r.Key]
	delete(e.kv, r.Key)
	return protocol.KVDeleteReply{Deleted: ok}, nil
}

func (e *memEngine) kvDeleteIfValueMatches(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVValueRequest](body)
	if perr != nil {
		return nil, perr
	}
	v, ok := e.kv[r.Key]
	if !ok || !bytes.Equal(v, r.Value) {
		return protocol.KVDeleteReply{Deleted: false}, nil
	}
	delete(e.kv, r.Key)
	return protocol.KVDeleteReply{Deleted: true}, nil
}

func (e *memEngine) kvExists(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.KVKeyRequest](body)
	if perr != nil {
		return nil, perr
	}
	_, ok := e.kv[r.Key]
	return protocol.KVExistsReply{Exists: ok}, nil
}

func (e *memEngine) object(prefix, key string) (memObject, *protocol.Error) {
	o, ok := e.objects[prefix+"/"+key]
	if !ok {
		return o, protocol.Errorf(protocol.NotFound, "object %q/%q", prefix, key)
	}
	return o, nil
}

func (e *memEngine) putObject(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.PutObjectRequest](body)
	if perr != nil {
		return nil, perr
	}
	e.now = e.now.Add(time.Second)
	e.objects[r.Prefix+"/"+r.Key] = memObject{content: r.Content, modified: e.now}
	return protocol.Empty{}, nil
}

func (e *memEngine) getObject(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.ObjectRequest](body)
	if perr != nil {
		return nil, perr
	}
	o, perr := e.object(r.Prefix, r.Key)
	if perr != nil {
		return nil, perr
	}
	return protocol.GetObjectReply{Content: o.content}, nil
}

func (e *memEngine) deleteObject(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.ObjectRequest](body)
	if perr != nil {
		return nil, perr
	}
	if _, perr := e.object(r.Prefix, r.Key); perr != nil {
		return nil, perr
	}
	delete(e.objects, r.Prefix+"/"+r.Key)
	return protocol.Empty{}, nil
}

func (e *memEngine) listObjects(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.ListObjectsRequest](body)
	if perr != nil {
		return nil, perr
	}
	keys := []string{}
	for k := range e.objects {
		if key, ok := strings.CutPrefix(k, r.Prefix+"/"); ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return protocol.ListObjectsReply{Keys: keys}, nil
}

func (e *memEngine) getObjectMetadata(body []byte) (any, *protocol.Error) {
	r, perr := decode[protocol.ObjectRequest](body)
	if perr != nil {
		return nil, perr
	}
	o, perr := e.object(r.Prefix, r.Key)
	if perr != nil {
		return nil, perr
	}
	return protocol.ObjectMetadataReply{Size: int64(len(o.content)), ModifiedAt: o.modified.Format(time.RFC3339Nano)}, nil
}

// lastContext is the "context" member of the last request the engine received.
func (e *memEngine) lastContext() *protocol.RequestContext {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.contexts[len(e.contexts)-1]
}

func TestKeyValueClient(t *testing.T) {
	cn, en := broker(t)
	e := startMemEngine(t, en)
	kv := NewKeyValue(transport(t, cn))
	ctx := withTimeout(t, 10*time.Second)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, got, want bool, err error) {
		t.Helper()
		must(err)
		if got != want {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}

	v, found, err := kv.Get(ctx, "a")
	if err != nil || found || v != nil {
		t.Fatalf("Get missing = %q, %v, %v; want not found", v, found, err)
	}
	if c := e.lastContext(); c == nil || c.TimeoutMS <= 0 || c.TimeoutMS > 10_000 {
		t.Fatalf("context member %+v, want timeout_ms from the 10s deadline", c)
	}
	must(kv.Set(ctx, "a", []byte("1"), 0))
	v, found, err = kv.Get(ctx, "a")
	if err != nil || !found || string(v) != "1" {
		t.Fatalf("Get = %q, %v, %v; want 1", v, found, err)
	}
	must(kv.Set(ctx, "empty", nil, 1500*time.Millisecond))
	v, found, err = kv.Get(ctx, "empty")
	if err != nil || !found || v == nil || len(v) != 0 {
		t.Fatalf("Get empty = %q (nil %v), %v, %v; want an empty value", v, v == nil, found, err)
	}

	set, err := kv.SetIfNotExists(ctx, "a", []byte("2"), 0)
	expect("SetIfNotExists existing", set, false, err)
	set, err = kv.SetIfNotExists(ctx, "b", []byte("2"), time.Minute)
	expect("SetIfNotExists new", set, true, err)
	ok, err := kv.Exists(ctx, "b")
	expect("Exists b", ok, true, err)
	ok, err = kv.DeleteIfValueMatches(ctx, "b", []byte("3"))
	expect("DeleteIfValueMatches other value", ok, false, err)
	ok, err = kv.DeleteIfValueMatches(ctx, "b", []byte("2"))
	expect("DeleteIfValueMatches same value", ok, true, err)
	ok, err = kv.Exists(ctx, "b")
	expect("Exists b after delete", ok, false, err)
	ok, err = kv.Delete(ctx, "a")
	expect("Delete a", ok, true, err)
	ok, err = kv.Delete(ctx, "a")
	expect("Delete a again", ok, false, err)

	e.mu.Lock()
	ttls := slices.Clone(e.ttls)
	e.mu.Unlock()
	if want := []float64{0, 1.5, 60}; !slices.Equal(ttls, want) {
		t.Fatalf("ttl_seconds sent %v, want %v", ttls, want)
	}

	err = kv.Set(ctx, "", []byte("x"), 0)
	var perr *protocol.Error
	if !errors.Is(err, protocol.ErrInvalidArgument) || !errors.As(err, &perr) || perr.Message != "key is empty" {
		t.Fatalf("Set empty key: %v, want the engine's INVALID_ARGUMENT", err)
	}
}

func TestKeyValueClientWithoutDeadline(t *testing.T) {
	cn, en := broker(t)
	e := startMemEngine(t, en)
	kv := NewKeyValue(transport(t, cn, WithDefaultTimeout(3*time.Second)))
	if _, err := kv.Exists(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if c := e.lastContext(); c == nil || c.TimeoutMS <= 0 || c.TimeoutMS > 3000 {
		t.Fatalf("context member %+v, want timeout_ms from the 3s default", c)
	}
}

func TestKeyValueClientNoEngine(t *testing.T) {
	cn, _ := broker(t)
	kv := NewKeyValue(transport(t, cn, WithRetryPolicy(RetryPolicy{})))
	_, _, err := kv.Get(withTimeout(t, 10*time.Second), "a")
	if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("err = %v, want no responders as UNAVAILABLE", err)
	}
	if !strings.Contains(err.Error(), "abi.svc.keyvalue.v1.get") {
		t.Fatalf("err %q does not name the subject", err)
	}
}

func TestObjectStorageClient(t *testing.T) {
	cn, en := broker(t)
	e := startMemEngine(t, en)
	objs := NewObjectStorage(transport(t, cn))
	ctx := withTimeout(t, 10*time.Second)

	if _, err := objs.GetObject(ctx, "p", "a"); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("GetObject missing: %v, want NOT_FOUND", err)
	}
	if _, err := objs.GetObjectMetadata(ctx, "p", "a"); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("GetObjectMetadata missing: %v, want NOT_FOUND", err)
	}
	keys, err := objs.ListObjects(ctx, "p")
	if err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("ListObjects empty = %#v, %v; want an empty list", keys, err)
	}
	content := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)
	for _, k := range []string{"b", "a"} {
		if err := objs.PutObject(ctx, "p", k, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := objs.PutObject(ctx, "q", "c", nil); err != nil {
		t.Fatal(err)
	}
	if c := e.lastContext(); c == nil || c.TimeoutMS <= 0 {
		t.Fatalf("context member %+v", c)
	}
	got, err := objs.GetObject(ctx, "p", "a")
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("GetObject = %d bytes, %v; want the %d bytes put", len(got), err, len(content))
	}
	got, err = objs.GetObject(ctx, "q", "c")
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("GetObject empty = %#v, %v; want an empty object", got, err)
	}
	keys, err = objs.ListObjects(ctx, "p")
	if err != nil || !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("ListObjects = %v, %v; want [a b]", keys, err)
	}
	md, err := objs.GetObjectMetadata(ctx, "p", "a")
	want := ObjectMetadata{Size: int64(len(content)), ModifiedAt: time.Date(2025, 3, 4, 5, 6, 9, 123456789, time.UTC)}
	if err != nil || md != want {
		t.Fatalf("GetObjectMetadata = %+v, %v; want %+v", md, err, want)
	}
	if err := objs.DeleteObject(ctx, "p", "a"); err != nil {
		t.Fatal(err)
	}
	if err := objs.DeleteObject(ctx, "p", "a"); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("DeleteObject again: %v, want the engine's NOT_FOUND", err)
	}
	keys, err = objs.ListObjects(ctx, "p")
	if err != nil || !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("ListObjects after delete = %v, %v; want [b]", keys, err)
	}
}

func TestMalformedReplyIsInternal(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	if _, err := en.QueueSubscribe(protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObjectMetadata), "q", func(m *nats.Msg) {
		reply(t, m, []byte(`{"size":3,"modified_at":"yesterday"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := en.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), "q", func(m *nats.Msg) {
		reply(t, m, []byte(`not json`))
	}); err != nil {
		t.Fatal(err)
	}
	ctx := withTimeout(t, 10*time.Second)
	if _, err := NewObjectStorage(tr).GetObjectMetadata(ctx, "p", "a"); !errors.Is(err, protocol.ErrInternal) || !strings.Contains(err.Error(), "yesterday") {
		t.Fatalf("bad modified_at: %v, want INTERNAL naming the value", err)
	}
	_, _, err := NewKeyValue(tr).Get(ctx, "a")
	var ce *CallError
	if !errors.Is(err, protocol.ErrInternal) || !errors.As(err, &ce) || ce.Instance != owner {
		t.Fatalf("bad JSON: %v, want INTERNAL with the engine that sent it", err)
	}
	if st := tr.Counters().Snapshot(); st.Failures[protocol.Internal] != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

// Only the calls whose reply can outgrow one message say the caller takes a parked
// reply (protocol.ReplyMayOverflow); on the others the header would cost every call
// its encoding and decoding and buy nothing. A keyvalue get says so only when its
// reply turns out not to fit (TestGetIsResentWithTheOverflowHeaderOnce).
func TestOverflowHeaderOnlyWhereAReplyMayOverflow(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	startMemEngine(t, nc)
	const embedder = "document"
	if _, err := nc.QueueSubscribe(protocol.ServiceSubject(embedder, protocol.OpGet), "q", func(m *nats.Msg) {
		out := nats.NewMsg(m.Reply)
		out.Data = []byte("{}")
		out.Header.Set(protocol.HeaderInstance, owner)
		_ = m.RespondMsg(out)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, rc := recordingTransport(t, srv)
	kv, obj := NewKeyValue(tr), NewObjectStorage(tr)
	ctx := withTimeout(t, 10*time.Second)
	v := []byte("v")
	calls := []struct {
		op   string
		want bool
		call func() error
	}{
		{protocol.OpSet, false, func() error { return kv.Set(ctx, "k", v, 0) }},
		{protocol.OpGet, false, func() error { _, _, err := kv.Get(ctx, "k"); return err }},
		{protocol.OpExists, false, func() error { _, err := kv.Exists(ctx, "k"); return err }},
		{protocol.OpSetIfNotExists, false, func() error { _, err := kv.SetIfNotExists(ctx, "k", v, 0); return err }},
		{protocol.OpDeleteIfValueMatches, false, func() error { _, err := kv.DeleteIfValueMatches(ctx, "k", v); return err }},
		{protocol.OpDelete, false, func() error { _, err := kv.Delete(ctx, "k"); return err }},
		{protocol.OpPutObject, false, func() error { return obj.PutObject(ctx, "p", "o", v) }},
		{protocol.OpGetObject, true, func() error { _, err := obj.GetObject(ctx, "p", "o"); return err }},
		{"Call " + protocol.OpGet, false, func() error {
			_, err := tr.Call(ctx, protocol.KeyValue, protocol.OpGet, []byte(`{"key":"k"}`))
			return err
		}},
		{"Call " + protocol.OpGetObject, true, func() error {
			_, err := tr.Call(ctx, protocol.ObjectStorage, protocol.OpGetObject, []byte(`{"prefix":"p","key":"o"}`))
			return err
		}},
		{"Call " + protocol.OpSet, false, func() error {
			_, err := tr.Call(ctx, protocol.KeyValue, protocol.OpSet, []byte(`{"key":"k","value":"dg=="}`))
			return err
		}},
		{protocol.OpListObjects, true, func() error { _, err := obj.ListObjects(ctx, "p"); return err }},
		{protocol.OpGetObjectMetadata, false, func() error { _, err := obj.GetObjectMetadata(ctx, "p", "o"); return err }},
		{protocol.OpDeleteObject, false, func() error { return obj.DeleteObject(ctx, "p", "o") }},
		{"an embedder's service", true, func() error {
			return NewService(tr, embedder).Call(ctx, protocol.OpGet, struct{}{}, nil)
		}},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		ms := rc.messages()
		rc.ops()
		if len(ms) != 1 {
			t.Fatalf("%s sent %d requests, want 1", c.op, len(ms))
		}
		if got := ms[0].Header.Get(protocol.HeaderOverflow) == "1"; got != c.want {
			t.Errorf("%s carried %s: %v, want %v", c.op, protocol.HeaderOverflow, got, c.want)
		}
	}
}

// TestConcurrentCallsShareNoRequestBuffer: typed calls reuse their request buffers
// (Transport.bodies), so calls at once must never share one: every set and get of many
// goroutines reaches the engine with its own key and value.
func TestConcurrentCallsShareNoRequestBuffer(t *testing.T) {
	cn, en := broker(t)
	startMemEngine(t, en)
	kv := NewKeyValue(transport(t, cn))
	ctx := withTimeout(t, 30*time.Second)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("g%d/k%d", g, i)
				value := []byte(strings.Repeat(key, i+1)) // bodies of many sizes
				if err := kv.Set(ctx, key, value, 0); err != nil {
					t.Errorf("set %s: %v", key, err)
					return
				}
				got, found, err := kv.Get(ctx, key)
				if err != nil || !found || !bytes.Equal(got, value) {
					t.Errorf("get %s = %.40q, %v, %v; want what was set", key, got, found, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
