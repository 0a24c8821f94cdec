// Package memory is the in-process object_storage backend: objects in a map guarded by
// a lock, with modification times from an injectable clock. Its data lives in this
// process and dies with it: no other engine can write it, so it checks no epoch
// (docs/architecture.md "Epoch").
package memory

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/abi-engine/engine/primaries/objectstorage"
)

// Store is an in-memory objectstorage.Store.
type Store struct {
	now func() time.Time

	mu       sync.RWMutex
	prefixes map[string]map[string]object // prefix -> key -> object
}

type object struct {
	content  []byte
	modified time.Time
}

var _ objectstorage.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithNow makes the store read time from now instead of time.Now.
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, prefixes: make(map[string]map[string]object)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// LocalStorage says where the data lives: in this process.
func (s *Store) LocalStorage() string { return "this process" }

// PutObject stores a copy of content.
func (s *Store) PutObject(_ context.Context, prefix, key string, content []byte) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	o := object{content: bytes.Clone(content), modified: s.now().UTC()}
	if o.content == nil {
		o.content = []byte{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.prefixes[prefix]
	if keys == nil {
		keys = make(map[string]object)
		s.prefixes[prefix] = keys
	}
	keys[key] = o
	return nil
}

func (s *Store) lookup(prefix, key string) (object, error) {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return object{}, err
	}
	s.mu.RLock()
	o, ok := s.prefixes[prefix][key]
	s.mu.RUnlock()
	if !ok {
		return object{}, objectstorage.NotFound(prefix, key)
	}
	return o, nil
}

// GetObject returns a copy of the object's content, made in the buffer
// objectstorage.ReadBuffer gives.
func (s *Store) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	o, err := s.lookup(prefix, key)
	if err != nil {
		return nil, err
	}
	content, err := objectstorage.ReadBuffer(ctx, prefix, key, int64(len(o.content)))
	if err != nil {
		return nil, err
	}
	copy(content, o.content)
	return content, nil
}

// GetObjectMetadata returns the object's size and modification time.
func (s *Store) GetObjectMetadata(_ context.Context, prefix, key string) (objectstorage.Metadata, error) {
	o, err := s.lookup(prefix, key)
	if err != nil {
		return objectstorage.Metadata{}, err
	}
	return objectstorage.Metadata{Size: int64(len(o.content)), ModifiedAt: o.modified}, nil
}

// DeleteObject removes the object.
func (s *Store) DeleteObject(_ context.Context, prefix, key string) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.prefixes[prefix]
	if _, ok := keys[key]; !ok {
		return objectstorage.NotFound(prefix, key)
	}
	delete(keys, key)
	if len(keys) == 0 {
		delete(s.prefixes, prefix)
	}
	return nil
}

// ListObjects returns the sorted keys directly under prefix.
func (s *Store) ListObjects(_ context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.prefixes[prefix]))
	for k := range s.prefixes[prefix] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// ListObjectsRecursive returns every object under prefix at any depth, sorted, named
// relative to prefix.
func (s *Store) ListObjectsRecursive(_ context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := []string{}
	for p, keys := range s.prefixes {
		for k := range keys {
			full := k
			if p != "" {
				full = p + "/" + k
			}
			if rel, ok := objectstorage.Relative(prefix, full); ok {
				names = append(names, rel)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}
