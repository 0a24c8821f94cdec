package objectstorage

import (
	"bytes"
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
