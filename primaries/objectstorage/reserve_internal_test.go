package objectstorage

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/protocol"
)

// What a get_object reserves for its reply is the size the reply is encoded to.
func TestReplySizesAreTheEncodedSizes(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 127, 128, 1 << 14, 300<<10 + 1} {
		content := bytes.Repeat([]byte{7}, n)
		if got, want := jsonReplySize(int64(n)), int64(len(protocol.GetObjectReply{Content: content}.AppendJSON(nil))); got != want {
			t.Errorf("object of %d bytes: JSON reply reserved %d, encoded %d", n, got, want)
		}
		rep := &osv1.GetObjectResponse{Result: &osv1.GetObjectResponse_Content{Content: content}}
		if got, want := protoReplySize(int64(n)), int64(proto.Size(rep)); got != want {
			t.Errorf("object of %d bytes: protobuf reply reserved %d, encoded %d", n, got, want)
		}
	}
}

// An object read into the tail of its reply's buffer is encoded there into the bytes
// the usual encoders write, whatever its size (the base64 blocks and their padding).
func TestInPlaceEncodingIsTheUsualEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 4, 5, 3071, 3072, 3073, 6144, 9215, 1 << 16, 300<<10 + 2} {
		content := make([]byte, n)
		for i := range content {
			content[i] = byte(rng.Uint32())
		}
		buf := make([]byte, jsonReplySize(int64(n)))
		copy(buf[len(buf)-n:], content)
		encodeJSONInPlace(buf, n)
		if want := (protocol.GetObjectReply{Content: content}).AppendJSON(nil); !bytes.Equal(buf, want) {
			t.Errorf("object of %d bytes: the JSON reply encoded in place differs from AppendJSON's", n)
		}
		buf = make([]byte, protoReplySize(int64(n)))
		copy(buf[len(buf)-n:], content)
		encodeProtoInPlace(buf, n)
		want, err := proto.Marshal(&osv1.GetObjectResponse{Result: &osv1.GetObjectResponse_Content{Content: content}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want) {
			t.Errorf("object of %d bytes: the protobuf reply encoded in place differs from proto.Marshal's", n)
		}
	}
}
