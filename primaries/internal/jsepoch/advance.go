package jsepoch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
)

// supersededBy is the header of a marker: the epoch that superseded the subject's.
const supersededBy = "Abi-Epoch-Superseded-By"

// maxHops bounds the markers ReadEpoch follows past the epoch B names. Each advance
// writes B as its last step, so B lags only by advances whose last step failed.
const maxHops = 64

// slot is what an epoch's check subject B.<epoch> holds: the check message writes under
// the epoch expect (check, at sequence seq, with the revisions of its shards), or the
// marker of the epoch next that superseded it (naming how many shards it had).
type slot struct {
	epoch, seq uint64
	check      bool
	next       uint64
	revs       []uint64
	shards     int
}

// recordOf is the record of s, a slot holding the check; its shards are remembered
// for the writes that carry it.
func (r *Record) recordOf(s slot) epoch.Record {
	return r.remember(epoch.Record{Epoch: s.epoch, Rev: s.seq}, s.revs)
}

// slotOf reads m, the last message on epoch n's check subject.
func (r *Record) slotOf(n uint64, m *js.RawStreamMsg) (slot, error) {
	s := slot{epoch: n, seq: m.Sequence}
	if revs, ok := parseCheck(n, m.Data); ok {
		s.check, s.revs, s.shards = true, revs, len(revs)
		return s, nil
	}
	next, err := strconv.ParseUint(m.Header.Get(supersededBy), 10, 64)
	shards, serr := uint64(0), error(nil)
	if h := m.Header.Get(shardsHeader); h != "" {
		shards, serr = strconv.ParseUint(h, 10, 32)
		if serr == nil && (shards == 0 || shards > maxShards) {
			serr = errors.New("out of range")
		}
	}
	s.shards = int(shards)
	if len(m.Data) > 0 || err != nil || serr != nil || next <= n {
		return slot{}, fmt.Errorf("the epoch check subject %s (sequence %d) holds %.32q with %s %q, neither epoch %d's check nor the marker of a newer epoch: it was written by something other than an engine",
			r.checkSubject(n), m.Sequence, m.Data, supersededBy, m.Header.Get(supersededBy), n)
	}
	s.next = next
	return s, nil
}

// advance moves the record from over (an epoch) to n:
//
//  0. n's check messages on its shards, in parallel (settleShards): they open nothing
//     until step 3 lists them, so they are written before writes under M are held.
//  1. the marker on B.<M>, expecting its revision: the compare-and-swap. Of two
//     adopters racing, one finds the marker. It names M's shard count.
//  2. the markers on M's shards (markShards): writes under M are refused from here on.
//  3. n's check message on B.<n> listing the revisions of its shards, expecting it
//     empty (settleHead): writes under n commit from here on.
//  4. n on B, expecting B.<n> unchanged since step 3: B only ever names an epoch whose
//     check message stood, and a late step 4 cannot name n once n is superseded.
//
// An adopter stopped between the steps leaves a record ReadEpoch still reads: it
// follows the marker from the epoch B names, marks its shards and, when the check
// messages are missing, writes them (settle), which are the steps the winner of step 1
// would have taken. Every step is single messages rather than a batch, which a
// single-node stream on file storage stages in a file store it syncs (milliseconds,
// while the bucket's writes wait); the shards of steps 0 and 2 go out in parallel.
func (r *Record) advance(ctx context.Context, n uint64, over epoch.Record) (epoch.Record, error) {
	if over.Rev == 0 {
		// No check message to mark: the record was written by hand (sweep.go). Swept
		// only while over's subject is still empty, as it was read.
		if s, err := r.slotAt(ctx, over.Epoch); err != nil || s.seq != 0 {
			return epoch.Record{}, r.advanceError(over.Epoch, n, "read", cmp.Or(err, epoch.ErrMoved))
		}
		if err := r.sweep(ctx, n, over.Epoch); err != nil {
			return epoch.Record{}, err
		}
	}
	// n's shards first, before the compare-and-swap: no write can expect them until
	// n's head lists them, so they open nothing, and writing them here keeps them out
	// of the time between the marking of over and n's head, when this engine's writes
	// are held back.
	revs, ok, err := r.settleShards(ctx, n)
	switch {
	case err != nil:
		return epoch.Record{}, err
	case !ok:
		return epoch.Record{}, fmt.Errorf("%s: epoch %d's check shards hold markers: it was superseded already: %w", r.base, n, epoch.ErrMoved)
	}
	data := strconv.AppendUint(nil, n, 10)
	marker := &nats.Msg{Subject: r.checkSubject(over.Epoch), Header: nats.Header{}}
	marker.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	marker.Header.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(over.Rev, 10))
	marker.Header.Set(supersededBy, string(data))
	shards := len(r.revsOf(over))
	if shards == 0 {
		// A record read elsewhere, or of the unsharded layout: the stream says
		// whether it has shards.
		listed, err := r.shardsListed(ctx, over.Epoch)
		if err != nil {
			return epoch.Record{}, err
		}
		shards = int(listed)
	}
	if shards > 0 {
		marker.Header.Set(shardsHeader, strconv.Itoa(shards))
	}
	if _, err := r.publish(ctx, marker); err != nil {
		return epoch.Record{}, r.advanceError(over.Epoch, n, "mark", err)
	}
	if err := r.markShards(ctx, over.Epoch, uint32(shards), n); err != nil {
		return epoch.Record{}, err
	}
	s, err := r.settleHead(ctx, n, revs, true)
	if err != nil {
		return epoch.Record{}, err
	}
	if !s.check {
		// Another adopter read our marker, wrote n's check and went past n meanwhile.
		return epoch.Record{}, fmt.Errorf("%s: epoch %d was superseded by %d as it was written: %w", r.base, n, s.next, epoch.ErrMoved)
	}
	current := &nats.Msg{Subject: r.base, Data: data, Header: nats.Header{}}
	current.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	rec := r.recordOf(s)
	r.checkHead(current, rec)
	if _, err := r.publish(ctx, current); err != nil {
		return epoch.Record{}, r.advanceError(over.Epoch, n, "record", err)
	}
	return rec, nil
}

// pass goes on from s, a marker: it marks the shards of s's epoch (an adopter stopped
// after marking the head may have left them live) and settles the epoch the marker
// names.
func (r *Record) pass(ctx context.Context, s slot) (slot, error) {
	shards := uint32(s.shards)
	if shards == 0 {
		// A marker that names no shards: written by an engine of the unsharded
		// layout, or by hand. The stream says whether the epoch has any.
		var err error
		if shards, err = r.shardsListed(ctx, s.epoch); err != nil {
			return slot{}, err
		}
	}
	if err := r.markShards(ctx, s.epoch, shards, s.next); err != nil {
		return slot{}, err
	}
	return r.settle(ctx, s.next)
}

// settle writes epoch n's check messages, on its Shards shards (settleShards) and
// then on its head B.<n> expecting it empty, unless the head holds a message already,
// and returns the slot: the check (ours, or another adopter's of n) or the marker of an
// epoch past n.
func (r *Record) settle(ctx context.Context, n uint64) (slot, error) {
	revs, ok, err := r.settleShards(ctx, n)
	if err != nil {
		return slot{}, err
	}
	return r.settleHead(ctx, n, revs, ok)
}

// settleHead is settle's last step, once the shards are settled (settleShards: their
// revisions, and ok false when one held a marker).
func (r *Record) settleHead(ctx context.Context, n uint64, revs []uint64, ok bool) (slot, error) {
	check := emptyCheck(r.checkSubject(n), checkData(n, revs))
	if ok {
		seq, err := r.publish(ctx, check)
		switch {
		case err == nil:
			return slot{epoch: n, seq: seq, check: true, revs: revs, shards: len(revs)}, nil
		case !jserr.IsConflict(err):
			return slot{}, fmt.Errorf("write the check of epoch %d on %s: %w", n, check.Subject, err)
		}
	}
	m, err := r.last(ctx, check.Subject)
	switch {
	case err != nil:
		return slot{}, fmt.Errorf("read the check of epoch %d on %s: %w", n, check.Subject, err)
	case m == nil:
		// Refused as not empty, then read as empty: only a hand that removed it.
		return slot{}, fmt.Errorf("the epoch check subject %s was emptied while epoch %d was being written", check.Subject, n)
	}
	return r.slotOf(n, m)
}

// publish sends m until the server decides it (Send) and returns its stream sequence.
func (r *Record) publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	var seq uint64
	err := Send(ctx, func() error {
		ack, err := r.js.PublishMsg(ctx, m)
		if err == nil {
			seq = ack.Sequence
		}
		return err
	})
	return seq, err
}

// advanceError names the step of advance (from m to n) that failed; a refusal by the
// step's expectation matches epoch.ErrMoved.
func (r *Record) advanceError(m, n uint64, step string, err error) error {
	if jserr.IsConflict(err) {
		return fmt.Errorf("%s: advance from epoch %d to %d, %s: %w (%v)", r.base, m, n, step, epoch.ErrMoved, err)
	}
	return fmt.Errorf("write %s: advance from epoch %d to %d, %s: %w", r.base, m, n, step, err)
}
