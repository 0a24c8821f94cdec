// Package jsepoch keeps the epoch record (package internal/epoch) of a JetStream bucket
// on subjects of the bucket's own stream, and puts the epoch check on a write, so the
// server refuses a stale write at the commit, atomically with it.
//
// Three kinds of subject under a base B (abi.epoch in a KV bucket), each holding one
// message (they are written with rollup):
//
//   - B holds the newest epoch whose check message stood when B was written: where a
//     reader starts, never where a write looks;
//   - B.<N> is epoch N's check subject, its head: while N is current it holds one
//     message, whose data is N (with its shards' revisions, "N/r0,r1,…") and whose
//     stream sequence is the record's revision; once N is superseded it holds a marker
//     instead (no data, header Abi-Epoch-Superseded-By naming the next epoch);
//   - B.<N>.<s> are N's check shards (shards.go), written before the head and marked
//     after it: what writes under N expect.
//
// A write under epoch N carries Nats-Expected-Last-Subject-Sequence = its shard's
// revision and Nats-Expected-Last-Subject-Sequence-Subject = B.<N>.<s>, s a hash of
// the write's subject (B.<N> itself, at the record's revision, for an epoch of the
// unsharded layout); the server stores it only while that subject is unchanged, and
// answers 10071 otherwise (verified on nats-server v2.15.3 for
// plain and TTL'd messages, purge markers and the messages of atomic batches). A store
// that adopted no epoch expects B itself to be empty. One check subject per epoch,
// rather than one record whose revision writes check, is what keeps a recreated bucket
// safe: its sequences start again at 1, so a stale engine's revision could be reused by
// the new record; a check subject of another epoch it can never be.
//
// Advancing from epoch M (revision r) to N is four steps (advance): the marker on B.<M>
// expecting r (the compare-and-swap: of two adopters racing, one finds the marker),
// the markers on M's shards, N's check messages (its shards, then B.<N>, each
// expecting its subject empty), then N on B expecting B.<N> unchanged. A reader
// follows the markers from the epoch B names, marks the shards of each epoch it passes
// and completes an advance stopped after its first write. None of it is an atomic
// batch, because a single-node stream on file storage stages each batch in a file
// store it syncs, and holds the bucket's writes meanwhile (12–15 ms under load, the
// longest pause of a handover); engines before the three-step layout advanced in one
// batch. From none, the shards' checks, then one atomic batch writes B, expecting it
// empty, and N's head. Markers of superseded epochs stay (one small message per
// subject): an expired marker would leave the subject empty, which a check could
// match.
//
// On a replicated stream the server judges one expectation per subject at a time (a
// second write checking B.<N>.<s> while one is proposed is answered 10164, nothing
// decided), so only epoch-checked writes that expect one shard commit one after
// another; a Fence's writes claim different shards while in flight (claims.go), and
// Send sends a write held back all the same again until it is decided.
package jsepoch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/jserr"
)

// Record is the epoch record of one bucket; it implements epoch.Records.
type Record struct {
	js       js.JetStream
	stream   js.Stream
	base     string
	repaired func(Repair) // OnRepair

	known   atomic.Pointer[[]known] // the shard revisions of recent records (remember)
	knownMu sync.Mutex              // serializes remember
}

var _ epoch.Records = (*Record)(nil)

// New returns the record under base (a subject) of the stream named stream, which must
// allow atomic batch publish (jsbucket.AtomicPublish). Bind it after the bucket's reads
// are set to the leader (package jsread): the handle keeps the way of reading it was
// bound with, on a recreated bucket too.
func New(ctx context.Context, j js.JetStream, stream, base string) (*Record, error) {
	st, err := j.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return &Record{js: j, stream: st, base: base}, nil
}

// Stream is the handle of the bucket's stream the record reads through.
func (r *Record) Stream() js.Stream { return r.stream }

// checkSubject is where writes under epoch n look: B.<n>, or B itself for a store that
// adopted none.
func (r *Record) checkSubject(n uint64) string {
	if n == 0 {
		return r.base
	}
	return r.base + "." + strconv.FormatUint(n, 10)
}

// Check puts the epoch check on m: the server stores m only while rec is the store's
// record (the zero Record: while the store holds none). It is the one place a
// JetStream backend attaches its token to a write.
//
// A sharded record (shards.go) is checked on the shard m's subject hashes to, so
// writes to different keys are judged in parallel.
func (r *Record) Check(m *nats.Msg, rec epoch.Record) { r.CheckAs(m, rec, m.Subject) }

// CheckAs is Check with the shard chosen by subject rather than m's own: the message
// that carries the check for a write on subject (an atomic batch's fence message).
func (r *Record) CheckAs(m *nats.Msg, rec epoch.Record, subject string) {
	r.checkClaimed(m, rec, subject, nil)
}

// checkHead puts on m the check of rec's head subject: what the record's own writes
// (B, after an advance or a repair) expect.
func (r *Record) checkHead(m *nats.Msg, rec epoch.Record) {
	r.expect(m, r.checkSubject(rec.Epoch), rec.Rev)
}

func (r *Record) expect(m *nats.Msg, subject string, seq uint64) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header.Set(js.ExpectedLastSubjSeqSubjHeader, subject)
	m.Header.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
}

// ReadEpoch reads the record; the zero Record when the store holds none. It reads B,
// then B.<N>, and follows the markers from there (an advance writes B last, so B may
// name an epoch already superseded) to the one check subject that holds a check
// message. An advance found half done, its predecessor marked and its check message not
// yet written, is completed (settle), so the record returned is one a write can carry.
func (r *Record) ReadEpoch(ctx context.Context) (epoch.Record, error) {
	m, err := r.last(ctx, r.base)
	if err != nil {
		return epoch.Record{}, err
	}
	what, n, ok := found(m)
	if !ok {
		// B deleted, purged or rewritten: the check subjects say where the bucket
		// stands (repair.go). With none, a B that held a value no engine writes is
		// refused, naming it; an empty or deleted one is a bucket that holds no epoch.
		var none epoch.Record
		var foreign error
		switch {
		case m == nil:
		case m.Header.Get("KV-Operation") != "":
			// None, under a delete or purge marker: an advance from none expects it
			// (WriteEpoch), and so does a write that adopted none.
			none.Rev = m.Sequence
		default:
			foreign = fmt.Errorf("the epoch record %s (sequence %d) holds %.32q, not an epoch (a positive decimal number): it was written by something other than an engine", r.base, m.Sequence, m.Data)
		}
		return r.recover(ctx, what, none, foreign)
	}
	c, err := r.last(ctx, r.checkSubject(n))
	switch {
	case err != nil:
		return epoch.Record{}, err
	case c == nil:
		// No check message: B was rewritten to an epoch no engine advanced to, or the
		// check was removed by hand. Another check subject, if any, is the record;
		// with none, writes under n expect none, and the next adoption marks the
		// subject, which ends them.
		return r.recover(ctx, fmt.Sprintf("epoch %d, whose check subject is empty", n), epoch.Record{Epoch: n}, nil)
	}
	s, err := r.slotOf(n, c)
	for hops := 0; err == nil && !s.check; hops++ {
		if hops == maxHops {
			return epoch.Record{}, fmt.Errorf("the epoch record %s: more than %d superseded epochs after the one it names (%d)", r.base, maxHops, m.Data)
		}
		s, err = r.pass(ctx, s)
	}
	if err != nil {
		return epoch.Record{}, err
	}
	return r.recordOf(s), nil
}

// last is the last message on subject, nil when it holds none.
func (r *Record) last(ctx context.Context, subject string) (*js.RawStreamMsg, error) {
	m, err := r.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// WriteEpoch advances the record from over to n (see the package doc): from none in one
// atomic batch (expecting B at over.Rev: 0 when B is empty, the marker's revision when
// B was deleted), from an epoch in four steps (advance). ErrMoved when
// over is no longer the store's.
func (r *Record) WriteEpoch(ctx context.Context, n uint64, over epoch.Record) (epoch.Record, error) {
	if over.Epoch > 0 {
		return r.advance(ctx, n, over)
	}
	// No record: a new bucket, or one whose record was deleted by hand, which may have
	// left a check subject live (sweep.go). Swept only when B is still as it was read
	// (empty, or the delete marker at over.Rev), so an adopter that read none before
	// another adopted touches nothing of theirs.
	switch m, err := r.last(ctx, r.base); {
	case err != nil:
		return epoch.Record{}, fmt.Errorf("read %s: %w", r.base, err)
	case m != nil && m.Sequence != over.Rev:
		return epoch.Record{}, fmt.Errorf("%s: %w (it holds an epoch now)", r.base, epoch.ErrMoved)
	}
	if err := r.sweep(ctx, n, 0); err != nil {
		return epoch.Record{}, err
	}
	revs, ok, err := r.settleShards(ctx, n)
	switch {
	case err != nil:
		return epoch.Record{}, err
	case !ok:
		return epoch.Record{}, fmt.Errorf("%s: %w (epoch %d's check shards hold markers)", r.base, epoch.ErrMoved, n)
	}
	var ack *jetstreamext.BatchAck
	err = Send(ctx, func() error {
		current := &nats.Msg{Subject: r.base, Data: strconv.AppendUint(nil, n, 10), Header: nats.Header{}}
		current.Header.Set(js.MsgRollup, js.MsgRollupSubject)
		current.Header.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(over.Rev, 10))
		// Conditional on B alone, as before shards: n's head may hold n's check
		// already (sweep), which this one replaces.
		check := &nats.Msg{Subject: r.checkSubject(n), Data: checkData(n, revs), Header: nats.Header{}}
		check.Header.Set(js.MsgRollup, js.MsgRollupSubject)
		var err error
		ack, err = jsdomain.Batch(ctx, r.js, []*nats.Msg{current, check}, jetstreamext.BatchFlowControl{AckFirst: false})
		return err
	})
	switch {
	case err == nil:
		// The commit is the last message of the batch: the head's check.
		return r.remember(epoch.Record{Epoch: n, Rev: ack.Sequence}, revs), nil
	case jserr.IsConflict(err):
		return epoch.Record{}, fmt.Errorf("%s: %w (%v)", r.base, epoch.ErrMoved, err)
	default:
		return epoch.Record{}, fmt.Errorf("write %s: %w", r.base, err)
	}
}

// Resend pauses, growing from a millisecond to maxPause with jitter, and at most
// maxResends times, before sending an undecided write again.
const (
	maxPause   = 20 * time.Millisecond
	maxResends = 250
)

// Send runs write, and runs it again while the server left it undecided (10164), with
// a short jittered pause, until it is decided, ctx ends or maxResends is reached. On a
// replicated bucket the server judges one expectation per check subject at a time:
// writes expecting one subject (an advance's, a write whose shard no claim kept to
// itself) may meet 10164 many times in a row, so jserr.Resend's few tries are not
// enough for them.
func Send(ctx context.Context, write func() error) error { return send(ctx, write, nil) }

// errMovedOn is send's answer when moved reported that the write's record was replaced
// while the store held the write back: the caller sends it again under the new one.
var errMovedOn = errors.New("jsepoch: the held epoch record moved on while the write was undecided")

// send is Send; moved, when not nil, is asked first on an undecided answer and, when it
// reports true, ends send with errMovedOn instead of a pause.
func send(ctx context.Context, write func() error, moved func() bool) error {
	pause := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := write()
		if attempt == maxResends || jserr.Classify(err) != jserr.Undecided {
			return err
		}
		if moved != nil && moved() {
			return errMovedOn
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
	}
}
