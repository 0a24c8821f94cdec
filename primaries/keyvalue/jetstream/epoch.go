package jetstream

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/epoch"
)

// AdoptEpoch adopts the epoch the engine serves under (package internal/epoch): the
// bucket's record is advanced to n when it is older, used as it is when it is n, and
// the adoption fails, matching epoch.ErrFenced, when the bucket holds a newer epoch.
// From then on every write carries it. Safe for concurrent use.
func (s *Store) AdoptEpoch(ctx context.Context, n uint64) error {
	if err := s.fence.Adopt(ctx, n); err != nil {
		return fmt.Errorf("keyvalue jetstream: %w", err)
	}
	return nil
}

// carry puts the held epoch's check on m: the one place this backend attaches its
// token to a write.
func (s *Store) carry(m *nats.Msg, tok epoch.Record) { s.fence.Carry(m, tok) }

// write sends a write under the held epoch (jsepoch.Fence.Write): conflict reports
// that a two-check write's key expectation failed.
func (s *Store) write(ctx context.Context, op, key string, send func(tok epoch.Record) error) (conflict bool, err error) {
	return s.fence.Write(ctx, fmt.Sprintf("keyvalue %s %.64q", op, key), send, func(err error) error {
		return s.writeError(op, key, err)
	})
}
