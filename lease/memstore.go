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
}

type memWrite struct {
	rec Record
	seq uint64
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{pub: notify.New(memWrite{})} }

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
	ctx, cancel := context.WithCancel(ctx)
	w := &memWatcher{updates: make(chan Record, 1), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, m)
	return w, nil
}

type memWatcher struct {
	updates chan Record
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *memWatcher) Updates() <-chan Record { return w.updates }

func (w *memWatcher) Stop() {
	w.cancel()
	<-w.done
}

func (w *memWatcher) run(ctx context.Context, m *MemStore) {
	defer close(w.done)
	defer close(w.updates)
	var last uint64
	first := true
	for {
		cur, changed := m.pub.Watch()
		if first || cur.seq != last {
			first, last = false, cur.seq
			select {
			case w.updates <- cur.rec:
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
