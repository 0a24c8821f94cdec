package jsbucket

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// createFrom creates the KV bucket with its first sequence at first, which
// jetstream.KeyValueConfig has no field for: the stream configuration nats.go makes of
// the bucket's (history, storage, replicas, description; no TTL, no limits), with
// FirstSeq. A stream that exists already is the bucket another engine created first
// (Open and Ensure check its settings after).
func (b *Bucket) createFrom(ctx context.Context, first uint64) error {
	kv := b.spec.KeyValue
	history := int64(max(kv.History, 1))
	_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              b.stream,
		Description:       kv.Description,
		Subjects:          []string{"$KV." + kv.Bucket + ".>"},
		MaxMsgsPerSubject: history,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		Storage:           kv.Storage,
		Replicas:          max(kv.Replicas, 1),
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        2 * time.Minute,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
		FirstSeq:          first,
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create stream %s at sequence %d: %w", b.stream, first, err)
	}
	return nil
}
