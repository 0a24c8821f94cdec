package postgres

import (
	"context"
	"time"

	"github.com/abi-engine/engine/primaries/keyvalue"
)

// Set stores value; ttl 0 means no expiry.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	_, err := s.write(ctx, "set", key, func(ctx context.Context, tok int64) (int64, bool, error) {
		return s.row(ctx, s.qSet, []byte(key), nonNil(value), micros(ttl), s.table, tok)
	})
	return err
}

// SetIfNotExists stores value only if key has no live value.
func (s *Store) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	return s.write(ctx, "set_if_not_exists", key, func(ctx context.Context, tok int64) (int64, bool, error) {
		return s.row(ctx, s.qSetNX, []byte(key), nonNil(value), micros(ttl), s.table, tok)
	})
}

// Delete removes key and reports whether it had a live value.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.write(ctx, "delete", key, func(ctx context.Context, tok int64) (int64, bool, error) {
		return s.row(ctx, s.qDelete, []byte(key), s.table, tok)
	})
}

// DeleteIfValueMatches removes key only if its live value equals value.
func (s *Store) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.write(ctx, "delete_if_value_matches", key, func(ctx context.Context, tok int64) (int64, bool, error) {
		return s.row(ctx, s.qDeleteIf, []byte(key), nonNil(value), s.table, tok)
	})
}
