package objectstorage_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/memory"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/protocol"
)

// pbClient calls the object_storage primary in protobuf, as a Python client does.
type pbClient struct {
	t     *testing.T
	nc    *nats.Conn
	token string
}

func (c pbClient) call(op string, req, rep proto.Message) *nats.Msg {
	c.t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	m := nats.NewMsg(protocol.ServiceSubject(protocol.ObjectStorage, op))
	m.Data = body
	m.Header.Set(protocol.HeaderAuthToken, c.token)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		c.t.Fatalf("%s: %v", op, err)
	}
	if r.Header.Get(micro.ErrorHeader) != "" || r.Header.Get(micro.ErrorCodeHeader) != "" {
		c.t.Fatalf("%s: a protobuf reply carries micro's error headers: %v", op, r.Header)
	}
	if err := proto.Unmarshal(r.Data, rep); err != nil {
		c.t.Fatalf("%s: reply %x: %v", op, r.Data, err)
	}
	return r
}

type withError interface {
	proto.Message
	GetError() *commonv1.CallError
}

func (c pbClient) wantCode(what string, r *nats.Msg, rep withError, code protocol.Code) {
	c.t.Helper()
	if got := rep.GetError().GetCode(); got != string(code) {
		c.t.Errorf("%s: error %v, want %s", what, rep.GetError(), code)
	}
	if got := r.Header.Get(protocol.HeaderErrorCode); got != string(code) {
		c.t.Errorf("%s: Abi-Error-Code %q, want %q", what, got, code)
	}
}

// TestProtobufContract drives the unary object operations in protobuf: nested keys,
// OBJECT_NOT_FOUND, listings as Keys set even when they hold one name, metadata
// naming the object.
func TestProtobufContract(t *testing.T) {
	secret := []byte("a test secret of 32 bytes or so!")
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	nc := servePrimary(t, srv, memory.New(), "engine-os", func(c *primaries.Config) { c.Tokens = v })
	tok, err := servicetoken.Mint(secret, "sdk-ci", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := pbClient{t: t, nc: nc, token: tok}
	ctx := &commonv1.CallContext{TraceId: "t", TimeoutMs: 10000}

	var put osv1.PutObjectResponse
	if r := c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Context: ctx, Prefix: "p", Key: "a.txt", Content: []byte("hi")}, &put); len(r.Data) != 0 {
		t.Errorf("put: reply %x, want an empty message", r.Data)
	}
	c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Prefix: "p", Key: "d/b.txt", Content: []byte("nested")}, &put)
	c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Prefix: "p", Key: "empty"}, &put)

	var get osv1.GetObjectResponse
	c.call(protocol.OpGetObject, &osv1.GetObjectRequest{Context: ctx, Prefix: "p", Key: "a.txt"}, &get)
	if !bytes.Equal(get.GetContent(), []byte("hi")) {
		t.Errorf("get: %v", &get)
	}
	c.call(protocol.OpGetObject, &osv1.GetObjectRequest{Prefix: "p/d", Key: "b.txt"}, &get)
	if string(get.GetContent()) != "nested" {
		t.Errorf("a nested key is the key under the longer prefix: %v", &get)
	}
	if r := c.call(protocol.OpGetObject, &osv1.GetObjectRequest{Prefix: "p", Key: "empty"}, &get); !bytes.Equal(r.Data, []byte{0x0a, 0x00}) {
		t.Errorf("get of an empty object: %x, want 0a 00", r.Data)
	}

	var list osv1.ListObjectsResponse
	c.call(protocol.OpListObjects, &osv1.ListObjectsRequest{Prefix: "p"}, &list)
	if got := strings.Join(list.GetKeys().GetKeys(), ","); got != "a.txt,empty" {
		t.Errorf("list p: %q, want the direct children a.txt,empty", got)
	}
	r := c.call(protocol.OpListObjects, &osv1.ListObjectsRequest{Prefix: "nothing"}, &list)
	c.wantCode("list of a prefix with nothing", r, &list, protocol.ObjectNotFound)

	var md osv1.GetObjectMetadataResponse
	c.call(protocol.OpGetObjectMetadata, &osv1.GetObjectMetadataRequest{Prefix: "p", Key: "d/b.txt"}, &md)
	m := md.GetMetadata()
	if m.GetFilePath() != "p/d/b.txt" || m.GetFileName() != "b.txt" || m.GetFileSizeBytes() != 6 || m.GetModifiedTime() == nil || m.CreatedTime != nil || m.MimeType != nil {
		t.Errorf("metadata: %v", m)
	}

	var del osv1.DeleteObjectResponse
	c.call(protocol.OpDeleteObject, &osv1.DeleteObjectRequest{Prefix: "p", Key: "a.txt"}, &del)
	if del.GetError() != nil {
		t.Errorf("delete: %v", del.GetError())
	}
	r = c.call(protocol.OpDeleteObject, &osv1.DeleteObjectRequest{Prefix: "p", Key: "a.txt"}, &del)
	c.wantCode("second delete", r, &del, protocol.ObjectNotFound)
	r = c.call(protocol.OpGetObject, &osv1.GetObjectRequest{Prefix: "p", Key: "a.txt"}, &get)
	c.wantCode("get of a deleted object", r, &get, protocol.ObjectNotFound)
	r = c.call(protocol.OpGetObjectMetadata, &osv1.GetObjectMetadataRequest{Prefix: "p", Key: "a.txt"}, &md)
	c.wantCode("metadata of a deleted object", r, &md, protocol.ObjectNotFound)

	// Names that leave the store or are empty stay INVALID_ARGUMENT, split or not.
	for _, key := range []string{"../x", "a//b", "", "d/"} {
		r = c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Prefix: "p", Key: key, Content: []byte("x")}, &put)
		c.wantCode("put "+key, r, &put, protocol.InvalidArgument)
	}
}

func TestSplitKey(t *testing.T) {
	for _, c := range []struct{ prefix, key, wantPrefix, wantKey string }{
		{"p", "a.txt", "p", "a.txt"},
		{"papers", "2024/q1/january.pdf", "papers/2024/q1", "january.pdf"},
		{"", "d/b.txt", "d", "b.txt"},
		{"p", "d/", "p/d", ""},
	} {
		p, k := objectstorage.SplitKey(c.prefix, c.key)
		if p != c.wantPrefix || k != c.wantKey {
			t.Errorf("SplitKey(%q, %q) = %q, %q; want %q, %q", c.prefix, c.key, p, k, c.wantPrefix, c.wantKey)
		}
	}
}
