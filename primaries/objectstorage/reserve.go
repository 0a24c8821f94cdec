package objectstorage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// ReadBuffer is what a backend reads an object of size bytes into: it calls it once it
// knows the size, before it reads a byte, and fills the buffer it returns (len size).
//
// In a get_object call whose reply will be too large for one message (and so parked on
// the overflow host) the buffer is the tail of the encoded reply's: the object is read
// where the reply needs it and encoded there, so the call holds the reply and nothing
// beside it, and those bytes are taken from the engine's memory budget first. A call
// beyond the budget is refused here having read nothing (RESOURCE_EXHAUSTED,
// retryable; PAYLOAD_TOO_LARGE when it could never fit: the SDK then reads the object
// by transfer). A backend that reads again (the object changed meanwhile) asks again,
// with the new size. Anywhere else (a transfer, a direct use of the store) it is a
// buffer of its own.
//
// A Store that never calls it is still served: its large replies are then counted from
// when they are parked, not from before their read.
func ReadBuffer(ctx context.Context, prefix, key string, size int64) ([]byte, error) {
	g, _ := ctx.Value(getKey{}).(*getCall)
	if g == nil {
		return make([]byte, size), nil
	}
	g.reply = nil // a read started over: what was reserved for the first goes back below
	reply := jsonReplySize(size)
	if g.protobuf {
		reply = protoReplySize(size)
	}
	if err := g.mem.Reserve(reply, reply); err != nil {
		if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
			return nil, &protocol.Error{Code: pe.Code, Retryable: pe.Retryable,
				Message: fmt.Sprintf("get_object of %.64q under prefix %.64q, %d bytes, read nothing: %s", key, prefix, size, pe.Message)}
		}
		return nil, err
	}
	if g.mem.Held() == 0 { // the reply fits one message: bounded like any call's
		return make([]byte, size), nil
	}
	g.reply = make([]byte, reply)
	return g.reply[reply-size:], nil
}

// getCall is a get_object call's part in ReadBuffer: its memory, its codec, and the
// reply's buffer once the object is read into its tail.
type getCall struct {
	mem      *primaries.CallMemory
	protobuf bool
	reply    []byte
}

type getKey struct{}

// withGet prepares ctx, a get_object call's, for ReadBuffer; nil for a call that
// reserves nothing.
func withGet(ctx context.Context) (context.Context, *getCall) {
	m := primaries.MemoryOf(ctx)
	if m == nil {
		return ctx, nil
	}
	g := &getCall{mem: m, protobuf: m.Protobuf()}
	return context.WithValue(ctx, getKey{}, g), g
}

// encoded is the call's reply encoded around content in place, or nil when content
// was not read into the reply's buffer (which the call then encodes as usual).
func (g *getCall) encoded(content []byte) []byte {
	if g == nil || g.reply == nil || len(content) == 0 ||
		unsafe.SliceData(content) != unsafe.SliceData(g.reply[len(g.reply)-len(content):]) {
		return nil
	}
	if g.protobuf {
		encodeProtoInPlace(g.reply, len(content))
	} else {
		encodeJSONInPlace(g.reply, len(content))
	}
	return g.reply
}

const jsonReplyOpen, jsonReplyClose = `{"content":"`, `"}`

// jsonReplySize is the size of get_object's JSON reply for an object of size bytes:
// {"content":"<base64>"} (protocol.GetObjectReply.AppendJSON).
func jsonReplySize(size int64) int64 {
	return int64(len(jsonReplyOpen) + base64.StdEncoding.EncodedLen(int(size)) + len(jsonReplyClose))
}

// protoReplySize is the size of get_object's protobuf reply for an object of size
// bytes: a GetObjectResponse with its content, field 1.
func protoReplySize(size int64) int64 {
	return int64(protowire.SizeTag(1) + protowire.SizeBytes(int(size)))
}

// encodeJSONInPlace turns buf, whose last n bytes are the object, into its JSON reply
// (jsonReplySize(n) bytes). The base64 is written from the front, a block at a time,
// each block copied aside before its 4/3 as many bytes are written: the writing never
// reaches what is still to be read, as the object starts a third of its size (plus the
// opening) past the opening and the writing gains a third of what it has read.
func encodeJSONInPlace(buf []byte, n int) {
	from := len(buf) - n
	w := copy(buf, jsonReplyOpen)
	var block [3 << 10]byte
	for read := 0; read < n; {
		k := copy(block[:], buf[from+read:])
		base64.StdEncoding.Encode(buf[w:], block[:k])
		w += base64.StdEncoding.EncodedLen(k)
		read += k
	}
	copy(buf[w:], jsonReplyClose)
}

// encodeProtoInPlace turns buf, whose last n bytes are the object, into its protobuf
// reply: the content field's tag and length in front of it.
func encodeProtoInPlace(buf []byte, n int) {
	// Appended to buf[:0], they are written over its front, exactly as long
	// (protoReplySize).
	protowire.AppendVarint(protowire.AppendTag(buf[:0], 1, protowire.BytesType), uint64(n))
}
