// Package memory is the in-process keyvalue backend: a map guarded by a lock, with
// TTLs on an injectable clock. Its data lives in this process and dies with it: no
// other engine can write it, so it checks no epoch (docs/architecture.md "Epoch").
package memory

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/abi-engine/engine/primaries/keyvalue"
)

// sweepMin is the fewest writes between two sweeps of expired entries. A sweep runs
// after as many writes as there are entries (at least sweepMin), so its cost spreads
// to O(1) per write.
const sweepMin = 1024

// Store is an in-memory keyvalue.Store. Expired entries read as absent at once and are
// removed by a sweep that writes trigger.
type Store struct {
	now func() time.Time

	mu     sync.RWMutex
	m      map[string]entry
	writes int // since the last sweep
}

type entry struct {
	value   []byte
	expires time.Time // zero: never
}

func (e entry) alive(now time.Time) bool { return e.expires.IsZero() || now.Before(e.expires) }

var (
	_ keyvalue.Store        = (*Store)(nil)
	_ keyvalue.SharedReader = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithNow makes the store read time from now instead of time.Now.
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, m: make(map[string]entry)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// LocalStorage says where the data lives: in this process.
func (s *Store) LocalStorage() string { return "this process" }

// lookup returns the live entry of key. Call with s.mu held.
func (s *Store) lookup(key string) (entry, bool) {
	e, ok := s.m[key]
	// The clock is read only for an entry that can expire: most never do, and a read
	// costs about as much as the lookup.
	if !ok || (!e.expires.IsZero() && !e.alive(s.now())) {
		return entry{}, false
	}
	return e, true
}

// Get returns a copy of the value of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, found, err := s.GetShared(ctx, key)
	if !found {
		return v, found, err
	}
	return bytes.Clone(v), true, nil
}

// GetShared returns the stored value of key itself (keyvalue.SharedReader): a write
// stores a copy of its value and never touches it again, so the bytes do not change
// while a reader holds them. The caller must not modify them.
func (s *Store) GetShared(_ context.Context, key string) ([]byte, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	e, ok := s.lookup(key)
	s.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	return nonNil(e.value), true, nil
}

// Set stores a copy of value; ttl 0 means no expiry.
func (s *Store) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(key, value, ttl)
	return nil
}

// SetIfNotExists stores value only if key has no live value.
func (s *Store) SetIfNotExists(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lookup(key); ok {
		return false, nil
	}
	s.put(key, value, ttl)
	return true, nil
}

// Delete removes key and reports whether it had a live value.
func (s *Store) Delete(_ context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.lookup(key)
	delete(s.m, key)
	return ok, nil
}

// DeleteIfValueMatches removes key only if its live value equals value.
func (s *Store) DeleteIfValueMatches(_ context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookup(key)
	if !ok || !bytes.Equal(e.value, value) {
		return false, nil
	}
	delete(s.m, key)
	return true, nil
}

// Exists reports whether key has a live value.
func (s *Store) Exists(_ context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.lookup(key)
	return ok, nil
}

// put writes an entry and sweeps when due. Call with s.mu held for writing.
func (s *Store) put(key string, value []byte, ttl time.Duration) {
	now := s.now()
	e := entry{value: bytes.Clone(nonNil(value))}
	if ttl > 0 {
		e.expires = now.Add(ttl)
	}
	s.m[key] = e
	s.writes++
	if s.writes >= max(sweepMin, len(s.m)) {
		s.writes = 0
		for k, e := range s.m {
			if !e.alive(now) {
				delete(s.m, k)
			}
		}
	}
}

// nonNil keeps "found, empty" distinct from "not found" (nil) for callers.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ListKeys pages the live keys that start with prefix (keyvalue.Store). The map has no
// order, so every page reads every key: fine for the sizes an in-process store holds.
func (s *Store) ListKeys(_ context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if err := keyvalue.CheckList(prefix, after, limit); err != nil {
		return nil, false, err
	}
	now := s.now()
	s.mu.RLock()
	keys := make([]string, 0, len(s.m))
	for k, e := range s.m {
		if e.alive(now) {
			keys = append(keys, k)
		}
	}
	s.mu.RUnlock()
	keys, more := keyvalue.Page(keys, prefix, after, limit)
	return keys, more, nil
}

// TTL is the time key still lives, 0 when it never expires (keyvalue.Store).
func (s *Store) TTL(_ context.Context, key string) (time.Duration, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return 0, false, err
	}
	s.mu.RLock()
	e, ok := s.lookup(key)
	s.mu.RUnlock()
	if !ok || e.expires.IsZero() {
		return 0, ok, nil
	}
	return max(e.expires.Sub(s.now()), time.Nanosecond), true, nil
}
