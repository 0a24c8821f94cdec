package keyvalue

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// fuzzStore is a Store that holds nothing: enough for the decoders to reach it.
type fuzzStore struct{}

func (fuzzStore) Get(context.Context, string) ([]byte, bool, error)        { return nil, false, nil }
func (fuzzStore) Set(context.Context, string, []byte, time.Duration) error { return nil }
func (fuzzStore) SetIfNotExists(context.Context, string, []byte, time.Duration) (bool, error) {
	return true, nil
}
func (fuzzStore) Delete(context.Context, string) (bool, error) { return false, nil }
func (fuzzStore) DeleteIfValueMatches(context.Context, string, []byte) (bool, error) {
	return false, nil
}
func (fuzzStore) Exists(context.Context, string) (bool, error) { return false, nil }
func (fuzzStore) ListKeys(_ context.Context, prefix, after string, limit int) ([]string, bool, error) {
	return []string{}, false, CheckList(prefix, after, limit)
}
func (fuzzStore) TTL(context.Context, string) (time.Duration, bool, error) { return 0, false, nil }

// FuzzProtobufRequest: whatever the body, every protobuf operation answers without
// panicking, with a reply message that decodes, or with a *protocol.Error whose reply
// message (Fail) decodes and carries the code.
func FuzzProtobufRequest(f *testing.F) {
	seeds := []proto.Message{
		&kvv1.GetRequest{Context: &commonv1.CallContext{TraceId: "t", TimeoutMs: 10000}, Key: "k"},
		&kvv1.SetRequest{Key: "k", Value: []byte("v"), Ttl: proto.Int64(5)},
		&kvv1.SetRequest{Key: "k", Ttl: proto.Int64(-1)},
		&kvv1.GetRequest{Context: &commonv1.CallContext{TimeoutMs: -1}, Key: "k"},
	}
	for _, s := range seeds {
		b, _ := proto.Marshal(s)
		f.Add(b)
	}
	f.Add([]byte{0xff})
	f.Add([]byte{})
	f.Add([]byte("{\"key\":\"k\"}"))
	ops := handler{store: fuzzStore{}}.protobufOps()
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, op := range ops {
			out, err := op.Run(context.Background(), data)
			if err == nil {
				continue
			}
			_ = out
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("%s(%x): a plain error %v", name, data, err)
			}
			var rep kvv1.GetResponse // every error field decodes as some message
			if uerr := proto.Unmarshal(op.Fail(pe), &rep); uerr != nil {
				t.Fatalf("%s: the error reply does not decode: %v", name, uerr)
			}
		}
	})
}
