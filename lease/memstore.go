package lease

import (
	"context"
	"sync"

	"github.com/abi-engine/engine/internal/notify"
)

// MemStore is a Store in memory, for tests and for engines that share one process.
// Like a KV store it counts every write, a delete included, in one revision sequence.
type MemStore struct {
	mu     sync.Mutex
	rec    Record // as a watch delivers it: a free record carries Freed
	period Period
	seq    uint64
	// pub is the record and its write sequence, published on every write for the
	// watches, which never take mu.
	pub *notify.Value[memWrite]
	// epoch is the epoch record, published for its watches; its revision counts in seq,
	// as every key of a KV bucket counts in one stream sequence.
	epoch *notify.Value[EpochRecord]
}

type memWrite struct {
	rec Record
	seq uint64
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{pub: notify.New(memWrite{}), epoch: notify.New(EpochRecord{})}
}

// write records r as the write numbered m.seq; m.mu is held.
func (m *MemStore) write(r Record) {
	m.rec = r
	m.pub.Store(memWrite{rec: r, seq: m.seq})
}

// Read implements Store.
func (m *MemStore) Read(ctx context.Context) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec.Free() {
		return Record{}, nil
	}
	r := m.rec
	r.Period = m.period
	return r, nil
}

// Create implements Store.
func (m *MemStore) Create(ctx context.Context, h Holder) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.rec.Free() {
		return 0, ErrTaken
	}
	m.seq++
	m.write(Record{Holder: h, Revision: m.seq})
	return m.seq, nil
}

// Update implements Store.
func (m *MemStore) Update(ctx context.Context, h Holder, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec.Free() || m.rec.Revision != rev {
		return 0, ErrConflict
	}
	m.seq++
	m.write(Record{Holder: h, Revision: m.seq})
	return m.seq, nil
}

// Delete implements Store.
func (m *MemStore) Delete(ctx context.Context, rev uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev == 0 || m.rec.Free() || m.rec.Revision != rev {
		return ErrConflict
	}
	m.seq++ // a delete is a write, as in a KV store
	m.write(Record{Freed: m.seq})
	return nil
}

// Publish implements Store.
func (m *MemStore) Publish(ctx context.Context, p Period) error {
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
func (m *MemStore) Put(h Holder) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.write(Record{Holder: h, Revision: m.seq})
	return m.seq
}

// watched is the record as a watch delivers it: a free one carries Freed, none carries
// the period.
func (m *MemStore) watched() Record { return m.pub.Load().rec }

// Watch implements Store.
func (m *MemStore) Watch(ctx context.Context) (Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return watchMem(ctx, m.pub, func(w memWrite) (uint64, Record) { return w.seq, w.rec }), nil
}

// ReadEpoch implements Store.
func (m *MemStore) ReadEpoch(ctx context.Context) (EpochRecord, error) {
	if err := ctx.Err(); err != nil {
		return EpochRecord{}, err
	}
	return m.epoch.Load(), nil
}

// WriteEpoch implements Store.
func (m *MemStore) WriteEpoch(ctx context.Context, e EpochRecord, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch.Load().Revision != rev {
		return 0, ErrConflict
	}
	m.seq++
	e.Revision = m.seq
	m.epoch.Store(e)
	return m.seq, nil
}

// PutEpoch overwrites the epoch record unconditionally, as another writer of the key
// could; tests use it to play one.
func (m *MemStore) PutEpoch(e EpochRecord) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	e.Revision = m.seq
	m.epoch.Store(e)
	return m.seq
}

// WatchEpoch implements Store.
func (m *MemStore) WatchEpoch(ctx context.Context) (EpochWatcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return watchMem(ctx, m.epoch, func(e EpochRecord) (uint64, EpochRecord) { return e.Revision, e }), nil
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
