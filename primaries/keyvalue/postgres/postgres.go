// Package postgres is the keyvalue backend on a PostgreSQL table, shared by every engine
// that reaches the database.
//
// Keys and values are bytea (a UTF-8 key may hold NUL, which text cannot); an expiry is
// a timestamptz compared with the database's clock, so engines on hosts with skewed
// clocks agree on what has expired. Expired rows read as absent at once; writes delete
// a bounded batch of them from time to time.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// DefaultTable is the table a Config without one uses.
const DefaultTable = "abi_keyvalue"

// sweepEvery is how many writes pass between two deletions of expired rows, and
// sweepBatch how many rows one deletion removes at most.
const (
	sweepEvery = 1000
	sweepBatch = 1000
)

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Config names the table.
type Config struct {
	// Table is created if it does not exist; empty means DefaultTable. It must match
	// ^[a-z_][a-z0-9_]{0,62}$.
	Table string
}

// Store is a keyvalue.Store on a PostgreSQL table.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // the pool was opened by Open and is closed by Close
	table  string
	writes atomic.Int64

	qGet, qSet, qSetNX, qDelete, qDeleteIf, qExists, qSweep string
}

var _ keyvalue.Store = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL connection string) and returns a
// store that closes the connections on Close.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("keyvalue postgres: connect: %w", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a store on pool, creating the table if it does not exist. Close leaves
// the pool open.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if !tableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("keyvalue postgres: table name %q must match %s", cfg.Table, tableName)
	}
	t := pgx.Identifier{cfg.Table}.Sanitize()
	idx := pgx.Identifier{cfg.Table + "_expires_at"}.Sanitize()
	// Engines starting together may race to create the table; the advisory lock makes
	// IF NOT EXISTS safe, which it is not on its own.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		stmts := []string{
			`SELECT pg_advisory_xact_lock(hashtext('abi-engine keyvalue ' || $1))`,
			`CREATE TABLE IF NOT EXISTS ` + t + ` (key bytea PRIMARY KEY, value bytea NOT NULL, expires_at timestamptz)`,
			`CREATE INDEX IF NOT EXISTS ` + idx + ` ON ` + t + ` (expires_at) WHERE expires_at IS NOT NULL`,
		}
		if _, err := tx.Exec(ctx, stmts[0], cfg.Table); err != nil {
			return err
		}
		for _, q := range stmts[1:] {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("keyvalue postgres: create table %s: %w", cfg.Table, err)
	}
	const live = `(expires_at IS NULL OR expires_at > now())`
	const expiry = `CASE WHEN $3::int8 > 0 THEN now() + $3::int8 * interval '1 microsecond' END`
	return &Store{
		pool:  pool,
		table: cfg.Table,
		qGet:  `SELECT value FROM ` + t + ` WHERE key = $1 AND ` + live,
		qSet: `INSERT INTO ` + t + ` (key, value, expires_at) VALUES ($1, $2, ` + expiry + `)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
		// An expired row counts as absent: it is replaced like a missing one.
		qSetNX: `INSERT INTO ` + t + ` AS t (key, value, expires_at) VALUES ($1, $2, ` + expiry + `)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
			WHERE t.expires_at IS NOT NULL AND t.expires_at <= now()`,
		qDelete:   `DELETE FROM ` + t + ` WHERE key = $1 RETURNING ` + live,
		qDeleteIf: `DELETE FROM ` + t + ` WHERE key = $1 AND value = $2 AND ` + live,
		qExists:   `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE key = $1 AND ` + live + `)`,
		qSweep: `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + `
			WHERE expires_at <= now() LIMIT ` + fmt.Sprint(sweepBatch) + `)`,
	}, nil
}

// Close closes the connections if Open made them.
func (s *Store) Close() {
	if s.owned {
		s.pool.Close()
	}
}

// LocalStorage is empty: the database is shared by every engine that reaches it.
func (s *Store) LocalStorage() string { return "" }

// readError turns a failed read into a protocol error. A read applies nothing, so
// resending it is safe: UNAVAILABLE, retryable. Context errors go to the primary, which
// knows whether its run was stopped.
func (s *Store) readError(op, key string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return protocol.Refused("keyvalue %s %.64q: PostgreSQL table %s: %v; the read changed nothing", op, key, s.table, err)
}

// writeError turns a failed write into a protocol error: retryable only when the
// statement surely did not commit (notApplied), otherwise UNAVAILABLE, not retryable, as
// a resend could apply it twice (design §5.8).
func (s *Store) writeError(op, key string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case notApplied(err):
		return protocol.Refused("keyvalue %s %.64q: PostgreSQL table %s: %v; the write was not applied", op, key, s.table, err)
	default:
		return protocol.Errorf(protocol.Unavailable, "keyvalue %s %.64q: PostgreSQL table %s: %v; the write may have been applied, so do not resend it blindly", op, key, s.table, err)
	}
}

// notApplied reports whether a failed single-statement write surely did not commit:
// pgconn says nothing reached the server (SafeToRetry), no connection was made, or the
// server failed the statement with severity ERROR, which rolls its implicit
// transaction back. Everything else may follow a commit: a connection lost while
// waiting for the result, or a FATAL such as a shutdown that ends a session whose
// commit is already durable.
func notApplied(err error) bool {
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	switch {
	case pgconn.SafeToRetry(err), errors.As(err, &connectErr):
		return true
	case errors.As(err, &pgErr):
		severity := pgErr.SeverityUnlocalized
		if severity == "" {
			severity = pgErr.Severity
		}
		return severity == "ERROR"
	}
	return false
}

// wrote counts a write and, every sweepEvery writes, deletes a batch of expired rows.
// A failed sweep changes nothing the caller asked for; the next one retries.
func (s *Store) wrote(ctx context.Context) {
	if s.writes.Add(1)%sweepEvery == 0 {
		_, _ = s.pool.Exec(ctx, s.qSweep)
	}
}

// micros rounds a TTL up to PostgreSQL's microseconds, so a positive TTL stays positive.
func micros(ttl time.Duration) int64 { return int64((ttl + time.Microsecond - 1) / time.Microsecond) }

// Get returns the value of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return nil, false, err
	}
	var v []byte
	err := s.pool.QueryRow(ctx, s.qGet, []byte(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readError("get", key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// Set stores value; ttl 0 means no expiry.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.qSet, []byte(key), nonNil(value), micros(ttl)); err != nil {
		return s.writeError("set", key, err)
	}
	s.wrote(ctx)
	return nil
}

// SetIfNotExists stores value only if key has no live value.
func (s *Store) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, s.qSetNX, []byte(key), nonNil(value), micros(ttl))
	if err != nil {
		return false, s.writeError("set_if_not_exists", key, err)
	}
	s.wrote(ctx)
	return tag.RowsAffected() == 1, nil
}

// Delete removes key and reports whether it had a live value.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var live bool
	err := s.pool.QueryRow(ctx, s.qDelete, []byte(key)).Scan(&live)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.writeError("delete", key, err)
	}
	return live, nil
}

// DeleteIfValueMatches removes key only if its live value equals value.
func (s *Store) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, s.qDeleteIf, []byte(key), nonNil(value))
	if err != nil {
		return false, s.writeError("delete_if_value_matches", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Exists reports whether key has a live value.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, s.qExists, []byte(key)).Scan(&exists); err != nil {
		return false, s.readError("exists", key, err)
	}
	return exists, nil
}

// nonNil sends an empty value as ” rather than NULL, which the column refuses.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
