package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/abi-engine/engine/primaries/keyvalue"
)

// ListKeys pages the live keys that start with prefix (keyvalue.Store): one query
// that asks for one key more than the page, to know whether more exist.
func (s *Store) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if err := keyvalue.CheckList(prefix, after, limit); err != nil {
		return nil, false, err
	}
	rows, err := s.pool.Query(ctx, s.qList, []byte(prefix), []byte(after), int64(limit)+1)
	if err != nil {
		return nil, false, s.readError("list_keys", prefix, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k []byte
		err := r.Scan(&k)
		return string(k), err
	})
	if err != nil {
		return nil, false, s.readError("list_keys", prefix, err)
	}
	if len(keys) > limit {
		return keys[:limit:limit], true, nil
	}
	return keys, false, nil
}

// TTL is the time key still lives, 0 when it never expires (keyvalue.Store).
func (s *Store) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return 0, false, err
	}
	var us int64
	err := s.pool.QueryRow(ctx, s.qTTL, []byte(key)).Scan(&us)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.readError("get_ttl", key, err)
	}
	return time.Duration(us) * time.Microsecond, true, nil
}
