// Package bbolt is the keyvalue backend on a local bbolt file: durable across restarts
// of this process, but on this host only (another engine cannot reach it, so a rollout
// without downtime refuses it).
//
// Each value is stored as 8 bytes of expiry (Unix nanoseconds, big-endian, 0 = never)
// followed by the value. A second bucket indexes expiring keys by expiry time, so every
// write transaction removes a bounded number of expired entries in expiry order.
//
// The file is on this host and bbolt locks it while it is open, so no second engine
// writes it at the same time; it checks no epoch (docs/architecture.md "Epoch").
package bbolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

var (
	valuesBucket = []byte("keyvalue")
	expiryBucket = []byte("keyvalue_expiry")
)

// sweepBatch bounds the expired entries one write transaction removes.
const sweepBatch = 256

// openTimeout bounds the wait for the file lock another process holds.
const openTimeout = time.Second

// Store is a keyvalue.Store in a bbolt file.
type Store struct {
	db   *bolt.DB
	path string
	now  func() time.Time
}

var _ keyvalue.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithNow makes the store read time from now instead of time.Now.
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// Open opens (creating if needed) the bbolt file at path. Only one process can hold it.
func Open(path string, opts ...Option) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("keyvalue bbolt: file %s is locked by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("keyvalue bbolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{valuesBucket, expiryBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("keyvalue bbolt: create buckets in %s: %w", path, err)
	}
	s := &Store{db: db, path: path, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// LocalStorage says where the data lives: in a file on this host.
func (s *Store) LocalStorage() string { return "file at " + s.path }

// record is a decoded stored value.
type record struct {
	expires uint64 // Unix nanoseconds; 0 = never
	value   []byte // valid only inside the transaction
}

func decode(raw []byte) (record, bool) {
	if raw == nil {
		return record{}, false
	}
	if len(raw) < 8 {
		return record{}, false // not written by us; treat as absent rather than fail every read
	}
	return record{expires: binary.BigEndian.Uint64(raw), value: raw[8:]}, true
}

func (r record) alive(now uint64) bool { return r.expires == 0 || now < r.expires }

// live reads the live record of key in b.
func (s *Store) live(b *bolt.Bucket, key []byte) (record, bool) {
	r, ok := decode(b.Get(key))
	if !ok || !r.alive(s.nowNanos()) {
		return record{}, false
	}
	return r, true
}

func (s *Store) nowNanos() uint64 { return uint64(s.now().UnixNano()) }

func (s *Store) view(ctx context.Context, f func(values *bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.wrap(s.db.View(func(tx *bolt.Tx) error { return f(tx.Bucket(valuesBucket)) }), false)
}

// update runs f in a write transaction that first sweeps expired entries. It begins
// and commits the transaction itself, rather than by db.Update, to tell the two ways a
// write fails apart: before the commit nothing reached the file (retryable), while a
// failed commit may have written the meta page before its fsync failed, and the next
// transaction then reads the write (unknown outcome).
func (s *Store) update(ctx context.Context, f func(values, expiry *bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return s.wrap(err, false)
	}
	defer func() { _ = tx.Rollback() }() // after a commit, or on a panic: ErrTxClosed or a rollback
	values, expiry := tx.Bucket(valuesBucket), tx.Bucket(expiryBucket)
	if err := s.sweep(values, expiry); err != nil {
		return s.wrap(err, false)
	}
	if err := f(values, expiry); err != nil {
		return s.wrap(err, false)
	}
	return s.wrap(tx.Commit(), true)
}

// wrap turns a bbolt failure into a protocol error: UNAVAILABLE, retryable unless the
// failure came from a commit (mayHaveApplied).
func (s *Store) wrap(err error, mayHaveApplied bool) error {
	var pe *protocol.Error
	switch {
	case err == nil || errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case mayHaveApplied:
		return protocol.Errorf(protocol.Unavailable, "keyvalue bbolt file %s: commit: %v; the write may have been applied, so do not resend it blindly", s.path, err)
	default:
		return protocol.Refused("keyvalue bbolt file %s: %v; nothing was written", s.path, err)
	}
}

// sweep removes up to sweepBatch entries whose expiry has passed, oldest first.
func (s *Store) sweep(values, expiry *bolt.Bucket) error {
	now := s.nowNanos()
	c := expiry.Cursor()
	for range sweepBatch {
		k, _ := c.First()
		if k == nil || binary.BigEndian.Uint64(k) > now {
			return nil
		}
		at, key := binary.BigEndian.Uint64(k), k[8:]
		// The index entry may be stale (the key was rewritten since); delete the value
		// only if it still carries this expiry.
		if r, ok := decode(values.Get(key)); ok && r.expires == at {
			if err := values.Delete(key); err != nil {
				return err
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func indexKey(at uint64, key []byte) []byte {
	k := make([]byte, 8+len(key))
	binary.BigEndian.PutUint64(k, at)
	copy(k[8:], key)
	return k
}

// put writes value with ttl, replacing any previous record and its index entry.
func (s *Store) put(values, expiry *bolt.Bucket, key, value []byte, ttl time.Duration) error {
	if err := s.unindex(values, expiry, key); err != nil {
		return err
	}
	var at uint64
	if ttl > 0 {
		at = uint64(s.now().Add(ttl).UnixNano())
		if err := expiry.Put(indexKey(at, key), nil); err != nil {
			return err
		}
	}
	raw := make([]byte, 8+len(value))
	binary.BigEndian.PutUint64(raw, at)
	copy(raw[8:], value)
	return values.Put(key, raw)
}

// remove deletes key and its index entry.
func (s *Store) remove(values, expiry *bolt.Bucket, key []byte) error {
	if err := s.unindex(values, expiry, key); err != nil {
		return err
	}
	return values.Delete(key)
}

func (s *Store) unindex(values, expiry *bolt.Bucket, key []byte) error {
	if r, ok := decode(values.Get(key)); ok && r.expires != 0 {
		return expiry.Delete(indexKey(r.expires, key))
	}
	return nil
}

// Get returns a copy of the value of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return nil, false, err
	}
	var out []byte
	var found bool
	err := s.view(ctx, func(values *bolt.Bucket) error {
		if r, ok := s.live(values, []byte(key)); ok {
			out, found = append([]byte{}, r.value...), true
		}
		return nil
	})
	return out, found, err
}

// Set stores value; ttl 0 means no expiry.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	return s.update(ctx, func(values, expiry *bolt.Bucket) error {
		return s.put(values, expiry, []byte(key), value, ttl)
	})
}

// SetIfNotExists stores value only if key has no live value.
func (s *Store) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	var set bool
	err := s.update(ctx, func(values, expiry *bolt.Bucket) error {
		if _, ok := s.live(values, []byte(key)); ok {
			return nil
		}
		set = true
		return s.put(values, expiry, []byte(key), value, ttl)
	})
	return set, err
}

// Delete removes key and reports whether it had a live value.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var deleted bool
	err := s.update(ctx, func(values, expiry *bolt.Bucket) error {
		_, deleted = s.live(values, []byte(key))
		return s.remove(values, expiry, []byte(key))
	})
	return deleted, err
}

// DeleteIfValueMatches removes key only if its live value equals value.
func (s *Store) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var deleted bool
	err := s.update(ctx, func(values, expiry *bolt.Bucket) error {
		r, ok := s.live(values, []byte(key))
		if !ok || !bytes.Equal(r.value, value) {
			return nil
		}
		deleted = true
		return s.remove(values, expiry, []byte(key))
	})
	return deleted, err
}

// Exists reports whether key has a live value.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var exists bool
	err := s.view(ctx, func(values *bolt.Bucket) error {
		_, exists = s.live(values, []byte(key))
		return nil
	})
	return exists, err
}
