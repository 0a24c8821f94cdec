package jetstreamstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/lease"
)

// A bucket deleted and recreated is a new bucket, but JetStream starts its sequences at
// 1 again, so a revision read in the old one can name a message of the new one: a
// holder paused across the recreation would then renew by a compare-and-swap that
// matches the successor's revision, and take the lease back. Two defences, by who
// created the bucket:
//
//   - A bucket the engine creates (at Open, or again after it was deleted) starts at
//     engineFirstSeq, far above 1 and above every earlier incarnation's revisions: a
//     revision read in an earlier incarnation is below its range (one created by hand
//     starts at 1; one an engine created, a second or more before, ended long before),
//     so a plain compare-and-swap on it cannot match. This costs nothing per write.
//   - A bucket created by hand (or by the Python engines) starts at 1, and so may the
//     next. There every conditional write checks, atomically with its own revision,
//     that the bucket is the incarnation the store read its revisions in: an atomic
//     batch of two messages, first one on the key incarnation_fence expecting the
//     incarnation's marker at the revision the store bound
//     (Nats-Expected-Last-Subject-Sequence-Subject), then the write itself with its own
//     expected revision, the batch's commit. An incarnation is named by a random id in
//     the key incarnation (created by the first engine that finds it absent) and marked
//     by the key incarnation.<id>; a recreated bucket has no marker of an earlier
//     incarnation, so the check fails there whatever the sequences. (One key read by
//     revision would not do: its revision can come round again, as the owner key's
//     does.) A batch costs a staged write on file storage (milliseconds; tens under
//     heavy load), so it is kept to such buckets; recreating one lets the engine
//     create it (docs/operations.md).
//
// The store binds an incarnation at Open and again in Read when the one bound is gone;
// only Read, because a holder replaces the revisions it holds by what Read returns. A
// write refused by the check is lease.ErrIncarnation, which matches lease.ErrConflict:
// the machine reads again, which binds the new incarnation, and goes on by the rules of
// a conflict (free: create it; another holder: lost). A broker without atomic batch
// publish (nats-server before 2.12) cannot run the check on a bucket created by hand.

const (
	// IncarnationKey holds the id of the bucket's incarnation; IncarnationKey.<id> is its
	// marker, and FenceKey carries the check of every conditional write.
	IncarnationKey = "incarnation"
	FenceKey       = "incarnation_fence"
)

// KV headers, as nats.go writes them.
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
)

// engineSeqFloor is where the sequences of a lease bucket an engine created start, at
// the least; a bucket created by hand (or by the Python engines) starts at 1.
const engineSeqFloor = 1 << 40

// engineFirstSeq is the first sequence of a lease bucket the engine creates: the
// creation second times 2^20, plus a random offset below 2^20, above engineSeqFloor
// (below 2^53, which a JavaScript client reads exactly, for two centuries). An incarnation created a second
// or more after another starts past every revision that one reached (it would need a
// million writes a second of its life), whatever it was; one a skewed clock puts in
// the same range is kept apart by the random offset.
func engineFirstSeq() uint64 {
	return engineSeqFloor + uint64(time.Now().Unix())<<20 + mrand.Uint64N(1<<20)
}

// binding is the incarnation a store reads and writes in: the first sequence of a
// bucket an engine created, or, in one created by hand, its marker's key and revision.
type binding struct {
	first uint64
	key   string
	rev   uint64
}

// Checked reports whether the store's writes check the bucket's incarnation with a
// batch (a bucket created by hand, on a broker with atomic batch publish).
func (s *Store) Checked() bool { return s.bound().key != "" }

// EngineCreated reports whether the bucket the store is bound to was created by an
// engine, its revisions in a range of its own.
func (s *Store) EngineCreated() bool { return s.bound().first >= engineSeqFloor }

func (s *Store) bound() binding {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.binding
}

// rebind binds the bucket's current incarnation: one an engine created by its first
// sequence; one created by hand by its marker, bound again when the marker bound is gone
// (the incarnation's keys are created when absent).
func (s *Store) rebind(ctx context.Context) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("read the bucket's stream: %w", err)
	}
	first := info.Config.FirstSeq
	s.mu.Lock()
	if first < engineSeqFloor && !info.Created.Equal(s.triedAtomic) {
		// A bucket created by hand that this store has not prepared yet (it was
		// recreated since): once per incarnation, as allowAtomic may wait.
		s.triedAtomic = info.Created
		s.mu.Unlock()
		s.batches.Store(allowAtomic(ctx, s.js, s.stream))
	} else {
		s.mu.Unlock()
	}
	b := s.bound()
	switch {
	case first >= engineSeqFloor:
		// Created by an engine: its revisions are its own, and plain compare-and-swaps
		// cannot match in another incarnation.
		b = binding{first: first}
	case !s.batches.Load():
		b = binding{first: first}
	case b.key != "" && b.first == first:
		e, err := s.kv.Get(ctx, b.key)
		switch {
		case err == nil && e.Revision() == b.rev:
			return nil
		case err != nil && !absent(err):
			return fmt.Errorf("read %s: %w", b.key, err)
		}
		fallthrough
	default:
		if b, err = s.incarnation(ctx); err != nil {
			return fmt.Errorf("bind the bucket's incarnation: %w", err)
		}
		b.first = first
	}
	s.mu.Lock()
	s.binding = b
	s.mu.Unlock()
	return nil
}

// incarnation reads the bucket's incarnation, creating its id and marker when absent.
func (s *Store) incarnation(ctx context.Context) (binding, error) {
	for range 4 {
		e, err := s.kv.Get(ctx, IncarnationKey)
		if absent(err) {
			if _, err := s.kv.Create(ctx, IncarnationKey, []byte(newID())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return binding{}, fmt.Errorf("create %s: %w", IncarnationKey, err)
			}
			continue // read what won
		}
		if err != nil {
			return binding{}, fmt.Errorf("read %s: %w", IncarnationKey, err)
		}
		id := string(e.Value())
		if !validID(id) {
			return binding{}, fmt.Errorf("the key %s holds %.40q, not an incarnation id (32 hex digits): it was written by something other than an engine", IncarnationKey, id)
		}
		key := IncarnationKey + "." + id
		m, err := s.kv.Get(ctx, key)
		if err == nil {
			return binding{key: key, rev: m.Revision()}, nil
		}
		if !absent(err) {
			return binding{}, fmt.Errorf("read %s: %w", key, err)
		}
		rev, err := s.kv.Create(ctx, key, nil)
		switch {
		case err == nil:
			return binding{key: key, rev: rev}, nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			return binding{}, fmt.Errorf("create %s: %w", key, err)
		}
	}
	return binding{}, errors.New("the incarnation keys changed four times while being read")
}

// allowAtomic makes sure a bucket created by hand allows atomic batch publish, which
// its incarnation check needs, and reports whether it does. A bucket the engine created
// needs no batch. The update is tried once, briefly: an engine whose permissions do not
// include updating the lease bucket's stream (docs/security.md grants none), or a
// broker before nats-server 2.12, leaves the bucket as it is, and its writes plain
// compare-and-swaps.
func allowAtomic(ctx context.Context, js jetstream.JetStream, st jetstream.Stream) bool {
	cfg := st.CachedInfo().Config
	switch {
	case cfg.AllowAtomicPublish:
		return true
	case cfg.FirstSeq >= engineSeqFloor:
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cfg.AllowAtomicPublish = true
	got, err := js.UpdateStream(ctx, cfg)
	return err == nil && got.CachedInfo().Config.AllowAtomicPublish
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// subject is the subject of key in the bucket.
func (s *Store) subject(key string) string { return "$KV." + s.name + "." + key }

// write sends m, a write of key expecting its last revision to be rev (0: none), in
// the incarnation bound, and returns its revision. A conflict is lease.ErrIncarnation
// when the marker bound is gone, else a conflict of m's own expectation.
func (s *Store) write(ctx context.Context, m *nats.Msg, rev uint64) (uint64, error) {
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	b := s.bound()
	var seq uint64
	err := jserr.Resend(ctx, func() error {
		if b.key == "" {
			ack, err := s.js.PublishMsg(ctx, m)
			if err == nil {
				seq = ack.Sequence
			}
			return err
		}
		fence := &nats.Msg{Subject: s.subject(FenceKey), Header: nats.Header{}}
		fence.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, s.subject(b.key))
		fence.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(b.rev, 10))
		ack, err := jetstreamext.PublishMsgBatch(ctx, s.js, []*nats.Msg{fence, m}, jetstreamext.BatchFlowControl{AckFirst: false})
		if err == nil {
			seq = ack.Sequence
		}
		return err
	})
	if err != nil && IsConflict(err) && b.key != "" {
		if _, gerr := s.kv.Get(ctx, b.key); absent(gerr) {
			return 0, fmt.Errorf("%w: the marker %s of the incarnation this engine read its revisions in is gone (%v)", lease.ErrIncarnation, b.key, err)
		}
	}
	return seq, err
}

// create writes value to key when it is absent or deleted, as KV Create does, in the
// incarnation bound.
func (s *Store) create(ctx context.Context, key string, value []byte) (uint64, error) {
	put := func(rev uint64) (uint64, error) {
		return s.write(ctx, &nats.Msg{Subject: s.subject(key), Data: value, Header: nats.Header{}}, rev)
	}
	rev, err := put(0)
	if err == nil || !IsConflict(err) || errors.Is(err, lease.ErrIncarnation) {
		return rev, err
	}
	// Refused as present: over a delete or purge marker, create at its revision.
	last, gerr := s.stream.GetLastMsgForSubject(ctx, s.subject(key))
	if gerr != nil || last.Header.Get(kvOperation) == "" {
		return 0, err
	}
	return put(last.Sequence)
}

// update writes value to key at revision rev, in the incarnation bound.
func (s *Store) update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	return s.write(ctx, &nats.Msg{Subject: s.subject(key), Data: value, Header: nats.Header{}}, rev)
}

// remove deletes key at revision rev (a KV delete marker), in the incarnation bound.
func (s *Store) remove(ctx context.Context, key string, rev uint64) error {
	m := &nats.Msg{Subject: s.subject(key), Header: nats.Header{}}
	m.Header.Set(kvOperation, kvDelete)
	_, err := s.write(ctx, m, rev)
	return err
}
