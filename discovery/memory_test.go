package discovery

import (
	"context"
	"fmt"
	"sync"
)

// memoryStore is the in-memory port of the tests: a value and an integer revision.
// conflicts makes that many compare-and-swaps fail as if another writer came first;
// gate, when set, is received from before each compare-and-swap (a test holds writes).
type memoryStore struct {
	mu        sync.Mutex
	data      []byte
	rev       uint64
	conflicts int
	reads     int
	cas       int
	failRead  error
	gate      chan struct{}
}

func (m *memoryStore) Read(context.Context) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failRead != nil {
		return nil, 0, m.failRead
	}
	return append([]byte(nil), m.data...), m.rev, nil
}

func (m *memoryStore) CompareAndSwap(_ context.Context, data []byte, rev uint64) error {
	if m.gate != nil {
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cas++
	if m.conflicts > 0 {
		m.conflicts--
		m.rev++ // another writer wrote
		return fmt.Errorf("%w: contended", ErrRevisionConflict)
	}
	if rev != m.rev {
		return fmt.Errorf("%w: at %d, asked %d", ErrRevisionConflict, m.rev, rev)
	}
	m.data, m.rev = append([]byte(nil), data...), m.rev+1
	return nil
}
