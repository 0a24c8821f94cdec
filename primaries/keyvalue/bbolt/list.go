package bbolt

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/abi-engine/engine/primaries/keyvalue"
)

// ListKeys pages the live keys that start with prefix (keyvalue.Store). bbolt keeps
// keys in byte order, so a page is one cursor scan from the first key it can hold;
// expired entries the sweep has not removed yet are skipped.
func (s *Store) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if err := keyvalue.CheckList(prefix, after, limit); err != nil {
		return nil, false, err
	}
	var keys []string
	var more bool
	err := s.view(ctx, func(values *bolt.Bucket) error {
		now := s.nowNanos()
		c := values.Cursor()
		for k, v := c.Seek([]byte(keyvalue.SeekFrom(prefix, after))); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if string(k) == after {
				continue
			}
			if r, ok := decode(v); !ok || !r.alive(now) {
				continue
			}
			if len(keys) == limit {
				more = true
				return nil
			}
			keys = append(keys, string(k))
		}
		return nil
	})
	return keys, more, err
}

// TTL is the time key still lives, 0 when it never expires (keyvalue.Store).
func (s *Store) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return 0, false, err
	}
	var ttl time.Duration
	var found bool
	err := s.view(ctx, func(values *bolt.Bucket) error {
		r, ok := s.live(values, []byte(key))
		if !ok {
			return nil
		}
		found = true
		if r.expires != 0 {
			ttl = max(time.Duration(r.expires-s.nowNanos()), time.Nanosecond)
		}
		return nil
	})
	return ttl, found, err
}
