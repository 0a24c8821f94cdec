// Package jetstreamstore keeps the ownership lease in a JetStream KV bucket (docs/design.md
// §4.1): bucket ABI_ENGINE, key owner, history 1, file storage, no TTL, replicas from
// configuration. It implements lease.Store. Beside the lease it keeps the holder's lease
// period (key lease_period) and the epoch record (key epoch, docs/design.md §4.7), which the
// Python engines never read; a bucket recreated after a deletion starts without either.
// Every conditional write also checks, in the same atomic batch, that the bucket is the
// incarnation its revision was read in (keys incarnation and incarnation.<id>,
// incarnation.go): a recreated bucket is a new bucket, whose revisions no write read in
// the old one can match.
//
// The bucket is opened by package jsbucket: an existing bucket with other settings is
// refused, and a bucket deleted under a running engine is recreated after the next
// failed call, so the holder can take the lease again.
//
// Writes are classified by package jserr: a conflict (10071, ErrKeyExists,
// ErrKeyRevisionMismatch) is lease.ErrConflict, and a write a replicated bucket left
// undecided (10164, another proposal in flight) is sent again. Watches are recreated when the connection reconnects,
// because a KV watcher is blind for 10-20 s after a server restart.
package jetstreamstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/lease"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
)

// Defaults of docs/design.md §4.1.
const (
	DefaultBucket = "ABI_ENGINE"
	Key           = "owner"
	// PeriodKey holds the holder's lease period (lease.Period), beside the six-key
	// record the Python engines read.
	PeriodKey = "lease_period"
	// EpochKey holds the epoch record (lease.EpochRecord, docs/design.md §4.7).
	EpochKey = "epoch"
)

// Config chooses the bucket. The zero value is the design's bucket with one replica.
type Config struct {
	Bucket   string // default ABI_ENGINE; tests use a bucket of their own
	Replicas int    // default 1; 3 on a cluster
	// Domain is the JetStream domain of the bucket (nats.jetstream.domain); "" is the
	// JetStream of the server the connection is on.
	Domain string
}

// Store is the lease in JetStream KV.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	stream jetstream.Stream // the bucket's, by name: it reaches a recreated bucket too
	name   string
	bucket *jsbucket.Bucket
	checks rate.Sometimes // the bucket check after a failed call, at most once a second
	// batches: the bucket allows atomic batch publish, so writes in a bucket created by
	// hand check the incarnation (incarnation.go).
	batches atomic.Bool

	mu          sync.Mutex
	binding     binding   // the incarnation the store reads and writes in
	triedAtomic time.Time // the creation time of the bucket allowAtomic last ran for
}

var _ lease.Store = (*Store)(nil)

// spec is the lease bucket of docs/design.md §4.1 and the settings an existing one must have:
// each of them, wrong, lets the key vanish by itself (by age, by a TTL, in a server
// restart, with a node) or keeps revisions a holder never wrote, and a second engine
// would then take a lease the first still holds.
func spec(cfg Config) jsbucket.Spec {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	return jsbucket.Spec{
		What: "lease bucket",
		KeyValue: &jetstream.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "abi-engine ownership lease",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		},
		FirstSeq: engineFirstSeq, // incarnation.go
		Require: []jsbucket.Setting{
			jsbucket.History(1),
			jsbucket.FileStorage(),
			jsbucket.NoMaxAge(),
			jsbucket.NoPerKeyTTL(),
			jsbucket.Replicas(cfg.Replicas),
		},
	}
}

// BucketSpec is the lease bucket Open creates and the settings it requires of an
// existing one; abi-engine doctor inspects a bucket against it (jsbucket.Inspect).
func BucketSpec(cfg Config) jsbucket.Spec { return spec(cfg) }

// Open binds the lease bucket, creating it when it is missing, and refuses a bucket
// whose settings could lose the lease by themselves (a *jsbucket.ShapeError naming each
// wrong setting). Two engines creating it at once is harmless: both ask for the same
// configuration.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	js, err := jsdomain.New(nc, cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("jetstreamstore: %w", err)
	}
	b, err := jsbucket.Open(ctx, js, spec(cfg))
	if err != nil {
		return nil, fmt.Errorf("jetstreamstore: %w", err)
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("jetstreamstore: open bucket %s: %w", cfg.Bucket, err)
	}
	st, err := js.Stream(ctx, b.Stream())
	if err != nil {
		return nil, fmt.Errorf("jetstreamstore: open bucket %s: %w", cfg.Bucket, err)
	}
	s := &Store{nc: nc, js: js, kv: kv, stream: st, name: cfg.Bucket, bucket: b,
		triedAtomic: st.CachedInfo().Created, checks: rate.Sometimes{Interval: time.Second}}
	s.batches.Store(allowAtomic(ctx, js, st))
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("jetstreamstore: open bucket %s: %w", cfg.Bucket, err)
	}
	return s, nil
}

// recoverTimeout bounds the bucket check after a failed call. A broker with JetStream
// answers it in milliseconds; a longer wait would only delay the failure's report, and
// with it the next renewal.
const recoverTimeout = 500 * time.Millisecond

// recover checks the bucket after a call failed for another reason than a conflict,
// and recreates it, empty and with the configured settings, when it was deleted. A
// holder then takes the lease again by the normal rules: its renewal conflicts, the
// re-read finds the lease free, and it creates it (or finds another holder and has
// lost). Without this, a deleted bucket fences the holder for good.
func (s *Store) recover(err error) error {
	if err == nil || IsConflict(err) || errors.Is(err, context.Canceled) {
		// Cancelled: the caller gave up (a worker stopping), which says nothing of the
		// bucket.
		return err
	}
	var recreated bool
	var cerr error
	s.checks.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
		defer cancel()
		recreated, cerr = s.bucket.Ensure(ctx)
	})
	switch {
	case recreated:
		return fmt.Errorf("%w (bucket %s was gone: recreated it)", err, s.bucket.Name())
	case cerr != nil && !errors.Is(cerr, jsbucket.ErrNotConnected):
		return fmt.Errorf("%w (and %w)", err, cerr)
	}
	return err
}

// ready waits until the bucket answers reads: on a replicated bucket just created, the
// replicas that answer direct gets may not be up yet, and a read gets "no responders".
func (s *Store) ready(ctx context.Context) error {
	for {
		_, err := s.Read(ctx)
		if !errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the bucket does not answer reads yet: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsConflict reports whether err is a compare-and-swap conflict from JetStream KV.
func IsConflict(err error) bool { return jserr.IsConflict(err) }

func classify(err error, conflict error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, lease.ErrIncarnation) {
		return fmt.Errorf("jetstreamstore: %w", err)
	}
	if IsConflict(err) {
		return fmt.Errorf("%w (%v)", conflict, err)
	}
	return fmt.Errorf("jetstreamstore: %w", err)
}

// record is the lease an entry of the key says; a delete or purge marker is a free
// lease that carries the marker's revision.
func record(e jetstream.KeyValueEntry) lease.Record {
	switch {
	case e == nil:
		return lease.Record{}
	case e.Operation() != jetstream.KeyValuePut:
		return lease.Record{Freed: e.Revision()}
	}
	return lease.Record{Holder: lease.DecodeHolder(e.Value()), Revision: e.Revision()}
}

func absent(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// Read implements lease.Store. A held record comes with the period key, read after it:
// a holder publishes its period after it takes the key, so a reader that finds the
// holder and then the period finds the holder's, if it was published.
func (s *Store) Read(ctx context.Context) (lease.Record, error) {
	// The revisions a holder uses are those Read returns: bind them to the bucket as it
	// is now (incarnation.go).
	if err := s.rebind(ctx); err != nil {
		return lease.Record{}, fmt.Errorf("jetstreamstore: read: %w", s.recover(err))
	}
	e, err := s.kv.Get(ctx, Key)
	if absent(err) {
		return lease.Record{}, nil
	}
	if err != nil {
		return lease.Record{}, fmt.Errorf("jetstreamstore: read: %w", s.recover(err))
	}
	r := record(e)
	r.Freed = 0
	if r.Free() {
		return r, nil
	}
	p, err := s.kv.Get(ctx, PeriodKey)
	switch {
	case absent(err):
	case err != nil:
		// Judging a holder by the wrong period could take a live lease: no answer rather
		// than half of one.
		return lease.Record{}, fmt.Errorf("jetstreamstore: read %s: %w", PeriodKey, err)
	case p.Operation() == jetstream.KeyValuePut:
		r.Period = lease.DecodePeriod(p.Value())
	}
	return r, nil
}

// Create implements lease.Store.
func (s *Store) Create(ctx context.Context, h lease.Holder) (uint64, error) {
	rev, err := s.create(ctx, Key, h.Encode())
	return rev, classify(s.recover(err), lease.ErrTaken)
}

// Update implements lease.Store.
func (s *Store) Update(ctx context.Context, h lease.Holder, rev uint64) (uint64, error) {
	if rev == 0 {
		// KV treats revision 0 as "the key never existed" and would create it.
		return 0, fmt.Errorf("%w: update at revision 0", lease.ErrConflict)
	}
	next, err := s.update(ctx, Key, h.Encode(), rev)
	return next, classify(s.recover(err), lease.ErrConflict)
}

// Delete implements lease.Store.
func (s *Store) Delete(ctx context.Context, rev uint64) error {
	if rev == 0 {
		// LastRevision(0) would delete whoever holds the key.
		return fmt.Errorf("%w: delete at revision 0", lease.ErrConflict)
	}
	return classify(s.recover(s.remove(ctx, Key, rev)), lease.ErrConflict)
}

// Publish implements lease.Store.
func (s *Store) Publish(ctx context.Context, p lease.Period) error {
	err := jserr.Resend(ctx, func() error {
		_, err := s.kv.Put(ctx, PeriodKey, p.Encode())
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstreamstore: publish %s: %w", PeriodKey, err)
	}
	return nil
}

// Put writes a raw value, unconditionally. Tests use it to plant a foreign value.
func (s *Store) Put(ctx context.Context, value []byte) (uint64, error) {
	rev, err := s.kv.Put(ctx, Key, value)
	return rev, classify(err, lease.ErrConflict)
}

// ReadEpoch implements lease.Store.
func (s *Store) ReadEpoch(ctx context.Context) (lease.EpochRecord, error) {
	e, err := s.kv.Get(ctx, EpochKey)
	if absent(err) {
		return lease.EpochRecord{}, nil
	}
	if err != nil {
		return lease.EpochRecord{}, fmt.Errorf("jetstreamstore: read %s: %w", EpochKey, s.recover(err))
	}
	rec, err := lease.DecodeEpoch(e.Value())
	if err != nil {
		return lease.EpochRecord{}, fmt.Errorf("jetstreamstore: read %s (revision %d): %w", EpochKey, e.Revision(), err)
	}
	rec.Revision = e.Revision()
	return rec, nil
}

// WriteEpoch implements lease.Store. Revision 0 creates the key (over a delete marker
// too, as KV Create does); any other is a KV update at that revision.
func (s *Store) WriteEpoch(ctx context.Context, e lease.EpochRecord, rev uint64) (uint64, error) {
	var next uint64
	var err error
	if rev == 0 {
		next, err = s.create(ctx, EpochKey, e.Encode())
	} else {
		next, err = s.update(ctx, EpochKey, e.Encode(), rev)
	}
	if err = classify(s.recover(err), lease.ErrConflict); err != nil {
		return 0, fmt.Errorf("write %s: %w", EpochKey, err)
	}
	return next, nil
}

// PutEpochValue writes a raw value to the epoch key, unconditionally. Tests use it to
// plant a foreign value.
func (s *Store) PutEpochValue(ctx context.Context, value []byte) (uint64, error) {
	rev, err := s.kv.Put(ctx, EpochKey, value)
	return rev, classify(err, lease.ErrConflict)
}

// epochRecord is the epoch record an entry of the key says; a delete or purge marker,
// or a value that is not a record, is only its revision.
func epochRecord(e jetstream.KeyValueEntry) lease.EpochRecord {
	if e.Operation() != jetstream.KeyValuePut {
		return lease.EpochRecord{Revision: e.Revision()}
	}
	rec, err := lease.DecodeEpoch(e.Value())
	if err != nil {
		return lease.EpochRecord{Revision: e.Revision()}
	}
	rec.Revision = e.Revision()
	return rec
}

// retryWatch is how long the watch waits before it tries again after a failure.
const retryWatch = 250 * time.Millisecond

// Watch implements lease.Store. The watch survives reconnects: it is recreated each
// time the connection comes back, and after any failure.
func (s *Store) Watch(ctx context.Context) (lease.Watcher, error) {
	return watchKey(ctx, s, Key, record)
}

// WatchEpoch implements lease.Store, as Watch does for the lease.
func (s *Store) WatchEpoch(ctx context.Context) (lease.EpochWatcher, error) {
	return watchKey(ctx, s, EpochKey, epochRecord)
}

func watchKey[T any](ctx context.Context, s *Store, key string, conv func(jetstream.KeyValueEntry) T) (*watcher[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher[T]{key: key, conv: conv, updates: make(chan T, 16), cancel: cancel, done: make(chan struct{})}
	status := s.nc.StatusChanged(nats.CONNECTED)
	go w.run(ctx, s, status)
	return w, nil
}

type watcher[T any] struct {
	key     string
	conv    func(jetstream.KeyValueEntry) T
	updates chan T
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *watcher[T]) Updates() <-chan T { return w.updates }

func (w *watcher[T]) Stop() {
	w.cancel()
	<-w.done
}

func (w *watcher[T]) run(ctx context.Context, s *Store, status chan nats.Status) {
	defer close(w.done)
	defer close(w.updates)
	defer s.nc.RemoveStatusListener(status)
	for ctx.Err() == nil {
		w.watchOnce(ctx, s, status)
		select {
		case <-ctx.Done():
		case <-time.After(retryWatch):
		case <-status:
		}
	}
}

// watchOnce runs one KV watcher until it fails, the connection reconnects or ctx ends.
func (w *watcher[T]) watchOnce(ctx context.Context, s *Store, status chan nats.Status) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kw, err := s.kv.Watch(wctx, w.key)
	if err != nil {
		return
	}
	defer kw.Stop() //nolint:errcheck // the watcher is gone either way
	for {
		select {
		case e, ok := <-kw.Updates():
			if !ok {
				return
			}
			// nil marks the end of the initial values. It is no news of the key, even
			// with no entry before it: on a replicated bucket it can come before the
			// current value (the consumer's pending count is read too early), and a
			// holder must not take that for a delete. A key that is absent without a
			// marker is reported when it is next written; readers learn of it by Read.
			if e == nil {
				continue
			}
			select {
			case w.updates <- w.conv(e):
			case <-ctx.Done():
				return
			}
		case <-status:
			// Reconnected: a watcher can stay blind for 10-20 s; start a fresh one.
			return
		case <-ctx.Done():
			return
		}
	}
}
