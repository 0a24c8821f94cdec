package jetstream

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
)

// resend is send, sent twice with the fail point resend-unknown: the second copy's
// answer is the one the caller gets, as when a reply is lost and the write resent.
func resend(fp *failpoint.Set, send func(tok jsepoch.Token) error) func(tok jsepoch.Token) error {
	if !failpoint.On(fp, failpoint.ResendUnknown) {
		return send
	}
	return func(tok jsepoch.Token) error {
		return failpoint.Resend(fp, func() error { return send(tok) })()
	}
}

// AdoptEpoch adopts the epoch the engine serves under (package internal/epoch): the
// bucket's record is advanced to n when it is older, used as it is when it is n, and
// the adoption fails, matching epoch.ErrFenced, when the bucket holds a newer epoch.
// From then on every write carries it. Safe for concurrent use.
func (s *Store) AdoptEpoch(ctx context.Context, n uint64) error {
	// The bucket may not be the one opened (deleted and recreated from outside, with
	// other settings): one that could lose what is written under n is refused here,
	// before the epoch is adopted in it.
	if _, err := s.opened.Ensure(ctx); err != nil {
		return fmt.Errorf("keyvalue jetstream: adopt epoch %d: %w", n, err)
	}
	if err := s.fence.Adopt(ctx, n); err != nil {
		return fmt.Errorf("keyvalue jetstream: %w", err)
	}
	return nil
}

// carry puts the held epoch's check on m: the one place this backend attaches its
// token to a write (none with the fail point skip-epoch).
func (s *Store) carry(m *nats.Msg, tok jsepoch.Token) { s.carryAs(m, tok, m.Subject) }

// carryAs is carry for a write on subject whose check rides on m (the fence message
// of a batch): the check's shard is subject's.
func (s *Store) carryAs(m *nats.Msg, tok jsepoch.Token, subject string) {
	if failpoint.On(s.fp, failpoint.SkipEpoch) {
		return
	}
	s.fence.CarryAs(m, tok, subject)
}

// write sends a write under the held epoch (jsepoch.Fence.Write): conflict reports
// that a two-check write's key expectation failed.
func (s *Store) write(ctx context.Context, op, key string, send func(tok jsepoch.Token) error) (conflict bool, err error) {
	send = resend(s.fp, send) // resend-unknown
	what := func() string { return fmt.Sprintf("keyvalue %s %.64q", op, key) }
	return s.fence.Write(ctx, what, send, func(err error) error {
		return s.writeError(op, key, err)
	})
}
