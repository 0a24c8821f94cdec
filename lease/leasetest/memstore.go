package leasetest

import (
	"context"
	"sync"

	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/lease"
)

// MemStore is a lease.Store in memory, for the tests of what drives a store (the lease
// machine, the actors). It uses only the lease package's exported API, as any store
// does, and passes Run. Like a KV store it counts every write, a delete included, in
// one revision sequence.
type MemStore struct {
	mu     sync.Mutex
	rec    lease.Record // as a watch delivers it: a free record carries Freed
	period lease.Period
	seq    uint64
	// pub is the record and its write sequence, published on every write for the
	// watches, which never take mu.
	pub *notify.Value[memWrite]
	// epoch is the epoch record, published for its watches; its revision counts in seq,
	// as every key of a KV bucket counts in one stream sequence.
	epoch *notify.Value[lease.EpochRecord]
}

type memWrite struct {
	rec lease.Record
	seq uint64
}

var _ lease.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{pub: notify.New(memWrite{}), epoch: notify.New(lease.EpochRecord{})}
}

// write records r as the write numbered m.seq; m.mu is held.
func (m *MemStore) write(r lease.Record) {
	m.rec = r
	m.pub.Store(memWrite{rec: r, seq: m.seq})
}

// Read implements lease.Store.
func (m *MemStore) Read(ctx context.Context) (lease.Record, error) {
	if err := ctx.Err(); err != nil {
		return lease.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec.Free() {
		return lease.Record{}, nil
	}
	r := m.rec
	r.Period = m.period
	return r, nil
}

// Create implements lease.Store.
func (m *MemStore) Create(ctx context.Context, h lease.Holder) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.rec.Free() {
		return 0, lease.ErrTaken
	}
	m.seq++
	m.write(lease.Record{Holder: h, Revision: m.seq})
	return m.seq, nil
}

// Update implements lease.Store.
func (m *MemStore) Update(ctx context.Context, h lease.Holder, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec.Free() || m.rec.Revision != rev {
		return 0, lease.ErrConflict
	}
	m.seq++
	m.write(lease.Record{Holder: h, Revision: m.seq})
	return m.seq, nil
}

// Delete implements lease.Store.
func (m *MemStore) Delete(ctx context.Context, rev uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev == 0 || m.rec.Free() || m.rec.Revision != rev {
		return lease.ErrConflict
	}
	m.seq++ // a delete is a write, as in a KV store
	m.write(lease.Record{Freed: m.seq})
	return nil
}

// Publish implements lease.Store.
func (m *MemStore) Publish(ctx context.Context, p lease.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.period = p
	return nil
}

// Put overwrites the record unconditionally, as another writer of the key could. Tests
// use it to play a thief or a foreign value.
func (m *MemStore) Put(h lease.Holder) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.write(lease.Record{Holder: h, Revision: m.seq})
	return m.seq
}

// Watched is the record as a watch delivers it: a free one carries Freed, none carries
// the period. A test that steps a lease.Machine by hand observes it where an actor
// would read its watch.
func (m *MemStore) Watched() lease.Record { return m.pub.Load().rec }

// Watch implements lease.Store.
func (m *MemStore) Watch(ctx context.Context) (lease.Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return watchMem(ctx, m.pub, func(w memWrite) (uint64, lease.Record) { return w.seq, w.rec }), nil
}

// ReadEpoch implements lease.Store.
func (m *MemStore) ReadEpoch(ctx context.Context) (lease.EpochRecord, error) {
	if err := ctx.Err(); err != nil {
		return lease.EpochRecord{}, err
	}
	return m.epoch.Load(), nil
}

// WriteEpoch implements lease.Store.
func (m *MemStore) WriteEpoch(ctx context.Context, e lease.EpochRecord, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch.Load().Revision != rev {
		return 0, lease.ErrConflict
	}
	m.seq++
	e.Revision = m.seq
	m.epoch.Store(e)
	return m.seq, nil
}

// PutEpoch overwrites the epoch record unconditionally, as another writer of the key
// could; tests use it to play one.
func (m *MemStore) PutEpoch(e lease.EpochRecord) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	e.Revision = m.seq
	m.epoch.Store(e)
	return m.seq
}

// WatchEpoch implements lease.Store.
func (m *MemStore) WatchEpoch(ctx context.Context) (lease.EpochWatcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return watchMem(ctx, m.epoch, func(e lease.EpochRecord) (uint64, lease.EpochRecord) { return e.Revision, e }), nil
}

// memWatcher delivers what a notify.Value holds, at once and on every write (told
// apart by its sequence), as a KV watch does.
type memWatcher[T any] struct {
	updates chan T
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchMem[V, T any](ctx context.Context, pub *notify.Value[V], view func(V) (uint64, T)) *memWatcher[T] {
	ctx, cancel := context.WithCancel(ctx)
	w := &memWatcher[T]{updates: make(chan T, 1), cancel: cancel, done: make(chan struct{})}
	go runMemWatch(ctx, w, pub, view)
	return w
}

func (w *memWatcher[T]) Updates() <-chan T { return w.updates }

func (w *memWatcher[T]) Stop() {
	w.cancel()
	<-w.done
}

func runMemWatch[V, T any](ctx context.Context, w *memWatcher[T], pub *notify.Value[V], view func(V) (uint64, T)) {
	defer close(w.done)
	defer close(w.updates)
	var last uint64
	first := true
	for {
		cur, changed := pub.Watch()
		if seq, v := view(cur); first || seq != last {
			first, last = false, seq
			select {
			case w.updates <- v:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
