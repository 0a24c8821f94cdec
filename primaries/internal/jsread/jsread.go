// Package jsread makes the JetStream buckets behind the kernel services answer reads
// from their stream leader only.
//
// Buckets are created with direct gets allowed, so any replica may answer a read; a
// replica still catching up after a node rejoined returns values older than writes
// already acknowledged, which breaks the keyvalue service's linearizability (the chaos
// harness's cluster-node-loss scenario found it).
package jsread

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaderOnly turns direct gets off on stream; it does nothing when they are off already.
// Handles bound to the bucket before the change keep their direct reads: bind again.
func LeaderOnly(ctx context.Context, j jetstream.JetStream, stream string) error {
	st, err := j.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	cfg := st.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	if _, err := j.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("stream %s: turn direct gets off: %w", stream, err)
	}
	return nil
}
