package sessions

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
)

// FuzzDecodeProto holds the protobuf decoding of every transfer request to two rules:
// it never panics, and what it refuses is INVALID_ARGUMENT; what it accepts carries
// the id the message holds. The seeds (the Python SDK's requests, truncated and
// corrupted ones) run in every go test.
func FuzzDecodeProto(f *testing.F) {
	ctx := &commonv1.CallContext{TraceId: "0b7c8a64-4a5d-4d7e-9b1a-6b3c2f1e0d9c", TimeoutMs: 10000}
	id := NewSessionID(NewOwnerID())
	for _, m := range []proto.Message{
		&transferv1.OpenRequest{Context: ctx, Operation: "get", Metadata: []byte{0x12, 1, 'p', 0x1a, 1, 'k'}, ChunkBytes: 65536},
		&transferv1.WriteRequest{Context: ctx, Id: id, Sequence: 3, Data: []byte("data")},
		&transferv1.StartRequest{Context: ctx, Id: id},
		&transferv1.ReadRequest{Context: ctx, Id: id, Sequence: 7},
		&transferv1.CloseRequest{Id: id},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append([]byte{0xff}, b...))
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	ops := []string{protocol.TransferOpen, protocol.TransferWrite, protocol.TransferStart, protocol.TransferRead, protocol.TransferClose}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, op := range ops {
			gotID, req, err := decodeProto(op, data)
			if err != nil {
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != protocol.InvalidArgument {
					t.Fatalf("%s: refused with %v, want INVALID_ARGUMENT", op, err)
				}
				continue
			}
			if req == nil {
				t.Fatalf("%s: accepted with no request", op)
			}
			if op == protocol.TransferOpen && gotID != "" {
				t.Fatalf("open: an id %q", gotID)
			}
		}
	})
}
