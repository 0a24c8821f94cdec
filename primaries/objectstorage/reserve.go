package objectstorage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// ReserveRead is what a backend calls once it knows the size of the object a
// get_object is about to read, and before it reads a byte: when the call's reply will
// be too large for one message (and so parked on the overflow host), what the call
// will hold at once, the object and its encoded reply, is taken from the engine's
// memory budget, and a call beyond it is refused here having read nothing
// (RESOURCE_EXHAUSTED, retryable; PAYLOAD_TOO_LARGE when it could never fit: the SDK
// then reads the object by transfer). A backend that reads again (the object changed
// meanwhile) calls it again with the new size. Outside a get_object call (a transfer,
// a direct use of the store) it does nothing.
//
// A Store that never calls it is still served: its large replies are counted from
// when they are parked, not from before their read.
func ReserveRead(ctx context.Context, prefix, key string, size int64) error {
	m := primaries.MemoryOf(ctx)
	if m == nil {
		return nil
	}
	reply := jsonReplySize(size)
	if m.Protobuf() {
		reply = protoReplySize(size)
	}
	err := m.Reserve(size+reply, reply)
	if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
		return &protocol.Error{Code: pe.Code, Retryable: pe.Retryable,
			Message: fmt.Sprintf("get_object of %.64q under prefix %.64q, %d bytes, read nothing: %s", key, prefix, size, pe.Message)}
	}
	return err
}

// jsonReplySize is the size of get_object's JSON reply for an object of size bytes:
// {"content":"<base64>"} (protocol.GetObjectReply.AppendJSON).
func jsonReplySize(size int64) int64 {
	return int64(len(`{"content":""}`) + base64.StdEncoding.EncodedLen(int(size)))
}

// protoReplySize is the size of get_object's protobuf reply for an object of size
// bytes: a GetObjectResponse with its content, field 1.
func protoReplySize(size int64) int64 {
	return int64(protowire.SizeTag(1) + protowire.SizeBytes(int(size)))
}
