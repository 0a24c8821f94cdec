package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/protocol"
)

// AdoptEpoch adopts the epoch the engine serves under (package internal/epoch): the
// bucket's record is advanced to n when it is older, used as it is when it is n, and
// the adoption fails, matching epoch.ErrFenced, when the bucket holds a newer epoch.
// From then on every write carries it. Safe for concurrent use.
func (s *Store) AdoptEpoch(ctx context.Context, n uint64) error {
	if err := s.held.Adopt(ctx, s.record, s.where(), n); err != nil {
		return fmt.Errorf("keyvalue jetstream: %w", err)
	}
	return nil
}

// carry puts the held epoch's check on m: the one place this backend attaches its
// token to a write.
func (s *Store) carry(m *nats.Msg, tok epoch.Record) { s.record.Check(m, tok) }

// write sends a write under the held epoch record (send builds its messages afresh on
// each call and puts the epoch check on one of them with carry) and reads the
// server's refusal. A write refused for the epoch is sent once more when this backend's
// own record moved on meanwhile (Judge's Resend); otherwise it is answered fenced (a
// newer epoch) or lost (the bucket lost its record), UNAVAILABLE, retryable: nothing
// was stored. conflict reports a refusal with the epoch current, which only a
// two-check write can meet: its key's expectation failed.
func (s *Store) write(ctx context.Context, op, key string, send func(tok epoch.Record) error) (conflict bool, err error) {
	resent := false
	for {
		tok := s.held.Load()
		err := jsepoch.Send(ctx, func() error { return send(tok) })
		switch {
		case err == nil:
			return false, nil
		case !jserr.IsConflict(err):
			return false, s.writeError(op, key, err)
		}
		verdict, jerr := s.held.Judge(ctx, s.record, s.where(), tok)
		switch verdict {
		case epoch.Current:
			return true, nil
		case epoch.Resend:
			if !resent {
				resent = true
				continue
			}
			return false, protocol.Refused("keyvalue %s %.64q: JetStream bucket %s refused the write twice while this engine's epoch moved on, so it stored nothing: %v", op, key, s.bucket, err)
		case epoch.Stale, epoch.Lost:
			return false, epoch.Refused(protocol.Refused("keyvalue %s %.64q: refused by its epoch, so it stored nothing: %v", op, key, jerr), jerr)
		default:
			if errors.Is(jerr, context.Canceled) || errors.Is(jerr, context.DeadlineExceeded) {
				return false, jerr
			}
			return false, protocol.Refused("keyvalue %s %.64q: JetStream bucket %s refused the write (%v), so it stored nothing; its epoch record could not be read: %v", op, key, s.bucket, err, jerr)
		}
	}
}
