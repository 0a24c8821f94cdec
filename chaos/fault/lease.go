package fault

import (
	"context"
	"fmt"

	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
)

// ForeignValue is a lease value no engine wrote: valid JSON that names no engine
// instance, as an operator's hand or another program might leave it.
var ForeignValue = []byte(`{"owner":"someone else","note":"written by the chaos harness"}`)

// PutLease writes value into the lease key of the bucket the engines use (replicas as
// configured for them), unconditionally, and returns its revision. Every engine must
// treat it as an unknown holder: the holder loses the lease and a contender takes it
// over after a silent lease period.
func PutLease(ctx context.Context, nc *nats.Conn, replicas int, value []byte) (uint64, error) {
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{Replicas: replicas})
	if err != nil {
		return 0, fmt.Errorf("open the lease bucket: %w", err)
	}
	rev, err := s.Put(ctx, value)
	if err != nil {
		return 0, fmt.Errorf("write %q into the lease key: %w", value, err)
	}
	return rev, nil
}
