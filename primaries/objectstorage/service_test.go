package objectstorage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/internal/transfertest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/memory"
	"github.com/abi-engine/engine/primaries/objectstorage/objtest"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const callTimeout = 10 * time.Second

// servePrimary serves the object_storage service over store on srv and returns a
// client connection.
func servePrimary(t *testing.T, srv *natstest.Server, store objectstorage.Store, instance string, with ...func(*primaries.Config)) *nats.Conn {
	t.Helper()
	cfg := primaries.Config{
		Conn: natstest.Connect(t, srv.URL()), InstanceID: instance, MaxConcurrent: 16, LeaseValid: func() bool { return true },
	}
	for _, w := range with {
		w(&cfg)
	}
	p, err := primaries.New(objectstorage.Service(store), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close the primary: %v", err)
		}
		<-e.PoisonCtx(ctx, pid).Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := p.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	return natstest.Connect(t, srv.URL())
}

// wireStore is an objectstorage.Store that calls a primary over NATS, the way the client
// SDK does, so the contract checks the service's mapping of every operation. Like any
// client it checks names before encoding them: JSON would turn invalid UTF-8 into
// U+FFFD.
type wireStore struct{ nc *nats.Conn }

func (w wireStore) call(op string, req, rep any) error {
	_, err := transfertest.Call(w.nc, protocol.ServiceSubject(protocol.ObjectStorage, op), nil, req, rep)
	return err
}

func (w wireStore) PutObject(_ context.Context, prefix, key string, content []byte) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	return w.call(protocol.OpPutObject, protocol.PutObjectRequest{Prefix: prefix, Key: key, Content: content}, &protocol.Empty{})
}

func (w wireStore) GetObject(_ context.Context, prefix, key string) ([]byte, error) {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return nil, err
	}
	var r protocol.GetObjectReply
	if err := w.call(protocol.OpGetObject, protocol.ObjectRequest{Prefix: prefix, Key: key}, &r); err != nil {
		return nil, err
	}
	if r.Content == nil {
		return nil, errors.New(`"content": null`)
	}
	return r.Content, nil
}

func (w wireStore) DeleteObject(_ context.Context, prefix, key string) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	return w.call(protocol.OpDeleteObject, protocol.ObjectRequest{Prefix: prefix, Key: key}, &protocol.Empty{})
}

func (w wireStore) ListObjects(_ context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	var r protocol.ListObjectsReply
	err := w.call(protocol.OpListObjects, protocol.ListObjectsRequest{Prefix: prefix}, &r)
	return r.Keys, err
}

func (w wireStore) ListObjectsRecursive(_ context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	var r protocol.ListObjectsReply
	err := w.call(protocol.OpListObjectsRecursive, protocol.ListObjectsRequest{Prefix: prefix}, &r)
	return r.Keys, err
}

func (w wireStore) GetObjectMetadata(_ context.Context, prefix, key string) (objectstorage.Metadata, error) {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return objectstorage.Metadata{}, err
	}
	var r protocol.ObjectMetadataReply
	if err := w.call(protocol.OpGetObjectMetadata, protocol.ObjectRequest{Prefix: prefix, Key: key}, &r); err != nil {
		return objectstorage.Metadata{}, err
	}
	at, err := time.Parse(time.RFC3339Nano, r.ModifiedAt)
	if err != nil {
		return objectstorage.Metadata{}, err
	}
	return objectstorage.Metadata{Size: r.Size, ModifiedAt: at}, nil
}

// The service passes the contract over the wire, modification times to the nanosecond.
func TestContractOverTheWire(t *testing.T) {
	clock := objtest.NewClock()
	objtest.Run(t, func(t *testing.T) objectstorage.Store {
		return wireStore{nc: servePrimary(t, natstest.Start(t), memory.New(memory.WithNow(clock.Now)), "engine-os")}
	}, objtest.WithClock(clock), objtest.WithMaxObjectBytes(256<<10))
}

// Bad names are refused before they reach the store, saying what was wrong.
func TestInvalidNamesOverTheWire(t *testing.T) {
	nc := servePrimary(t, natstest.Start(t), memory.New(), "engine-os")
	for _, c := range []struct {
		op, body, want string
	}{
		{protocol.OpPutObject, `{"prefix":"../x","key":"k","content":""}`, `must not be ".."`},
		{protocol.OpPutObject, `{"prefix":"/etc","key":"passwd","content":""}`, "empty segment"},
		{protocol.OpGetObject, `{"prefix":"p","key":"a/b"}`, "contains /"},
		{protocol.OpGetObject, `{"prefix":"p"}`, "key must not be empty"},
		{protocol.OpDeleteObject, `{"prefix":"p","key":".."}`, `must not be ".."`},
		{protocol.OpListObjects, `{"prefix":"a//b"}`, "empty segment"},
		{protocol.OpGetObjectMetadata, `{"prefix":5,"key":"k"}`, `member "prefix" must be a string`},
		{protocol.OpPutObject, `{"prefix":"p","key":"k","content":"%%%"}`, "not a valid base64 string"},
	} {
		_, err := transfertest.Call(nc, protocol.ServiceSubject(protocol.ObjectStorage, c.op), nil, json.RawMessage(c.body), nil)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.InvalidArgument || !strings.Contains(pe.Message, c.want) {
			t.Errorf("%s %s: %v, want INVALID_ARGUMENT saying %q", c.op, c.body, err, c.want)
		}
	}
}

// An empty object travels as "" and an empty listing as [].
func TestReplyShapes(t *testing.T) {
	nc := servePrimary(t, natstest.Start(t), memory.New(), "engine-os")
	req := func(op, body string) string {
		m, err := nc.Request(protocol.ServiceSubject(protocol.ObjectStorage, op), []byte(body), callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return string(m.Data)
	}
	if got := req(protocol.OpListObjects, `{"prefix":""}`); got != `{"keys":[]}` {
		t.Errorf("empty list: %s", got)
	}
	if got := req(protocol.OpPutObject, `{"prefix":"","key":"e"}`); got != `{}` {
		t.Errorf("put without content: %s", got)
	}
	if got := req(protocol.OpGetObject, `{"prefix":"","key":"e"}`); got != `{"content":""}` {
		t.Errorf("empty object: %s", got)
	}
	if got := req(protocol.OpGetObjectMetadata, `{"prefix":"","key":"e"}`); !strings.HasPrefix(got, `{"size":0,"modified_at":"`) || !strings.HasSuffix(got, `Z"}`) {
		t.Errorf("metadata: %s", got)
	}
}

// startTransfers serves the object_storage transfer host over store.
func startTransfers(t *testing.T, srv *natstest.Server, store objectstorage.Store) *sessions.TransferHost {
	t.Helper()
	h, err := objectstorage.NewTransferHost(natstest.Connect(t, srv.URL()), store, sessions.NewOwnerID(), func() bool { return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	h.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close the transfer host: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// Objects larger than one message go through the transfer host's put and get, and
// meet the one-message operations on the same store.
func TestLargeObjectsThroughTransfers(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(16<<10))
	store := memory.New()
	nc := servePrimary(t, srv, store, "engine-os")
	startTransfers(t, srv, store)
	c := transfertest.Client{NC: nc, Prefix: protocol.TransferPrefix(protocol.ObjectStorage)}

	big := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // 160 KiB, ten times the limit
	name := protocol.ObjectTransfer{Prefix: "videos/2026", Key: "clip.bin"}
	// Too large for put_object: the request cannot even be sent.
	if err := (wireStore{nc: nc}).PutObject(context.Background(), name.Prefix, name.Key, big); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("put_object of %d bytes: %v, want the client's max payload error", len(big), err)
	}
	if err := c.Put(protocol.OpTransferPut, name, big); err != nil {
		t.Fatal(err)
	}
	md, err := (wireStore{nc: nc}).GetObjectMetadata(context.Background(), name.Prefix, name.Key)
	if err != nil || md.Size != int64(len(big)) {
		t.Fatalf("metadata after the transfer: %+v %v", md, err)
	}
	got, err := c.Get(protocol.OpTransferGet, name)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("transfer get: %d bytes, %v", len(got), err)
	}

	// Errors of the store and of the names reach the client as protocol errors.
	if _, err := c.Get(protocol.OpTransferGet, protocol.ObjectTransfer{Prefix: "videos", Key: "missing"}); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("get of a missing object: %v, want NOT_FOUND", err)
	}
	if err := c.Put(protocol.OpTransferPut, protocol.ObjectTransfer{Prefix: "../up", Key: "k"}, []byte("x")); !errors.Is(err, protocol.ErrInvalidArgument) {
		t.Fatalf("put with a bad prefix: %v, want INVALID_ARGUMENT", err)
	}
	if err := c.Put(protocol.OpTransferPut, nil, []byte("x")); !errors.Is(err, protocol.ErrInvalidArgument) {
		t.Fatalf("put without metadata: %v, want INVALID_ARGUMENT", err)
	}
}
