package jsepoch

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
)

// An advance marks the check subject of the epoch it read, and in a record only engines
// wrote that is the one live check subject: every earlier one was marked by the advance
// that passed it. A record that was written by hand breaks that chain: B set to 999
// with no check message on B.999, or B deleted, leaves the check subject of the epoch
// the engines last used (say B.1) live, and a write a paused holder sends under it
// would still commit after an advance that marked only B.999. So when the record read
// has no check message to mark (over.Rev == 0: B names an epoch whose check subject is
// empty, or there is no B), the advance sweeps: it marks every check subject still live
// below the new epoch, and refuses to go to an epoch at or below one the bucket has
// already seen. The sweep lists the check subjects (one request) and reads each; with
// an intact record it never runs, so a normal advance stays three messages.

// sweep marks every check subject B.<K> with K < n that still holds K's check message,
// except skip's, and returns a *epoch.StaleError when a check subject above n exists,
// or n's holds a marker: the bucket has seen a newer epoch, so n would go back.
func (r *Record) sweep(ctx context.Context, n, skip uint64) error {
	live, shards, err := r.checkEpochs(ctx)
	if err != nil {
		return err
	}
	var ahead uint64
	for _, k := range live {
		switch {
		case k > n:
			ahead = max(ahead, k)
		case k == n:
			// n's own check subject: a check message is n's (the write that follows
			// replaces it, so writes under the old one are refused); a marker says n
			// was superseded already.
			s, err := r.slotAt(ctx, k)
			if err != nil {
				return err
			}
			ahead = max(ahead, s.next)
		}
	}
	if ahead > 0 {
		return &epoch.StaleError{Store: "epoch record " + r.base, Epoch: n, Current: ahead}
	}
	for _, k := range live {
		// n's own check is never marked as superseded by n: an adopter that raced
		// another to n from none would leave a marker naming its own subject, which no
		// read can follow.
		if k >= n {
			continue
		}
		if k != skip {
			if err := r.supersede(ctx, k, n); err != nil {
				return err
			}
		}
		// Shards whatever the head: skip's head is marked by the advance that follows,
		// which does not know of shards a head written by hand no longer names.
		if err := r.markShards(ctx, k, shards[k], n); err != nil {
			return err
		}
	}
	return nil
}

// supersede writes n's marker on B.<k> when it still holds k's check message,
// expecting that message: a conflict means another adopter marked it meanwhile. Then
// it marks k's shards (markShards), which a marker on the head alone leaves live.
func (r *Record) supersede(ctx context.Context, k, n uint64) error {
	s, err := r.slotAt(ctx, k)
	if err != nil || !s.check {
		return err
	}
	marker := &nats.Msg{Subject: r.checkSubject(k), Header: nats.Header{}}
	marker.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	marker.Header.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(s.seq, 10))
	marker.Header.Set(supersededBy, strconv.FormatUint(n, 10))
	if s.shards > 0 {
		marker.Header.Set(shardsHeader, strconv.Itoa(s.shards))
	}
	if _, err := r.publish(ctx, marker); err != nil && !jserr.IsConflict(err) {
		return fmt.Errorf("supersede epoch %d on %s: %w", k, marker.Subject, err)
	}
	return r.markShards(ctx, k, uint32(s.shards), n)
}

// slotAt reads what B.<k> holds; the zero slot when it is empty.
func (r *Record) slotAt(ctx context.Context, k uint64) (slot, error) {
	m, err := r.last(ctx, r.checkSubject(k))
	switch {
	case err != nil:
		return slot{}, fmt.Errorf("read the check of epoch %d on %s: %w", k, r.checkSubject(k), err)
	case m == nil:
		return slot{}, nil
	}
	return r.slotOf(k, m)
}
