// Package postgres is the keyvalue backend on a PostgreSQL table, shared by every engine
// that reaches the database.
//
// Keys and values are bytea (a UTF-8 key may hold NUL, which text cannot); an expiry is
// a timestamptz compared with the database's clock, so engines on hosts with skewed
// clocks agree on what has expired. Expired rows read as absent at once; writes delete
// a bounded batch of them from time to time.
//
// The table's epoch (package internal/epoch) is a row of the table abi_engine_epochs,
// named after it. Every write is one statement that locks that row FOR SHARE and
// writes only when it holds the epoch this backend adopted (AdoptEpoch); advancing the
// epoch updates the row, whose lock waits for the writes under way, and a write that
// waited sees the new epoch. So a stale write is refused at its commit, atomically
// with it, and costs no extra round trip. A refused write applied nothing: it is
// answered UNAVAILABLE, retryable, and matches epoch.ErrFenced when the table holds a
// newer epoch. The row outlives the table (dropping and recreating the table keeps
// its epoch).
//
// Each table also has a random id (StoresTable, Identity), made by the first engine
// that opens it: the proof, for a standby, that it reaches the lease holder's store
// and not another database that merely has a table of the same name.
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

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// DefaultTable is the table a Config without one uses.
const DefaultTable = "abi_keyvalue"

// EpochTable holds the epoch of every keyvalue table, one row per table.
const EpochTable = "abi_engine_epochs"

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
	// Failpoints hosts skip-epoch (package failpoint); nil: none.
	Failpoints *failpoint.Set
}

// Store is a keyvalue.Store on a PostgreSQL table.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // the pool was opened by Open and is closed by Close
	table  string
	writes atomic.Int64
	held   epoch.Held
	epochs records // the table's epoch row
	fp     *failpoint.Set

	qGet, qSet, qSetNX, qDelete, qDeleteIf, qExists, qSweep string
	qList, qTTL                                             string
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
	et := pgx.Identifier{EpochTable}.Sanitize()
	// Engines starting together may race to create the table; the advisory lock makes
	// IF NOT EXISTS safe, which it is not on its own.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		stmts := []string{
			`SELECT pg_advisory_xact_lock(hashtext('abi-engine keyvalue ' || $1))`,
			`CREATE TABLE IF NOT EXISTS ` + t + ` (key bytea PRIMARY KEY, value bytea NOT NULL, expires_at timestamptz)`,
			`CREATE INDEX IF NOT EXISTS ` + idx + ` ON ` + t + ` (expires_at) WHERE expires_at IS NOT NULL`,
			`CREATE TABLE IF NOT EXISTS ` + et + ` (name text PRIMARY KEY, epoch bigint NOT NULL CHECK (epoch >= 0))`,
			// A row from the start (epoch 0: none adopted), so every write has a row
			// to lock, even before the first adoption.
			`INSERT INTO ` + et + ` (name, epoch) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING`,
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('abi-engine epochs'))`); err != nil {
			return err
		}
		for i, q := range stmts {
			var args []any
			if i == 0 || i == len(stmts)-1 {
				args = []any{cfg.Table}
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return err
			}
		}
		return ensureIdentity(ctx, tx, cfg.Table)
	})
	if err != nil {
		return nil, fmt.Errorf("keyvalue postgres: create table %s: %w", cfg.Table, err)
	}
	s := &Store{pool: pool, table: cfg.Table, epochs: records{pool: pool, table: et, name: cfg.Table}, fp: cfg.Failpoints}
	s.queries(t, et)
	return s, nil
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
// a resend could apply it twice (docs/design.md §5.8).
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
