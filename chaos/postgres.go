package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	kvpg "github.com/abi-engine/engine/primaries/keyvalue/postgres"
)

// A run on PostgreSQL (Options.KeyValue) keeps its keyvalue data in a table of its
// own, which it creates before the engines start and drops at the end, so every key
// starts absent. A trigger logs every commit to the keys a scenario watches (those
// starting with watchedPrefix) in a second table, in commit order: what storage
// committed, for check.NoStaleWrite.

// watchedPrefix starts the keys whose commits a run on PostgreSQL logs.
const watchedPrefix = "chaos-watched-"

// setupPostgres opens the database and creates the run's keyvalue table and its log.
func (h *harness) setupPostgres() error {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	h.pgTable = "chaos_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, h.opts.PostgresURL)
	if err != nil {
		return fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	h.pg = pool
	// The backend creates its table as the engines will find it.
	if _, err := kvpg.New(ctx, pool, kvpg.Config{Table: h.pgTable}); err != nil {
		return fmt.Errorf("chaos: create the keyvalue table: %w", err)
	}
	t, log, fn := h.pgNames()
	prefix := hex.EncodeToString([]byte(watchedPrefix))
	for _, q := range []string{
		`CREATE TABLE ` + log + ` (seq bigserial PRIMARY KEY, key bytea NOT NULL, value bytea, op text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE k bytea; v bytea;
		BEGIN
			IF TG_OP = 'DELETE' THEN k := OLD.key; ELSE k := NEW.key; v := NEW.value; END IF;
			IF substring(k FROM 1 FOR ` + fmt.Sprint(len(watchedPrefix)) + `) = '\x` + prefix + `'::bytea THEN
				INSERT INTO ` + log + ` (key, value, op) VALUES (k, v, TG_OP);
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER ` + pgx.Identifier{h.pgTable + "_log"}.Sanitize() + ` AFTER INSERT OR UPDATE OR DELETE ON ` + t + ` FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("chaos: set up the commit log of %s: %w", h.pgTable, err)
		}
	}
	h.event("step", "postgres", "keyvalue in table %s", h.pgTable)
	return nil
}

// pgNames are the run's keyvalue table, its log and the log's trigger function, quoted.
func (h *harness) pgNames() (table, log, fn string) {
	return pgx.Identifier{h.pgTable}.Sanitize(), pgx.Identifier{h.pgTable + "_commits"}.Sanitize(),
		pgx.Identifier{h.pgTable + "_log"}.Sanitize()
}

// dropPostgres drops what setupPostgres created and closes the connections.
func (h *harness) dropPostgres() {
	if h.pg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), 30*time.Second)
	defer cancel()
	t, log, fn := h.pgNames()
	for _, q := range []string{`DROP TABLE IF EXISTS ` + t, `DROP TABLE IF EXISTS ` + log, `DROP FUNCTION IF EXISTS ` + fn + `()`} {
		if _, err := h.pg.Exec(ctx, q); err != nil {
			h.logf("postgres: %s: %v", q, err)
		}
	}
	h.pg.Close()
}

// pgLog reads the run's commit log for the keys watched.
type pgLog struct {
	h    *harness
	mu   sync.Mutex
	keys []string
}

func (h *harness) postgresCommits(context.Context) (*pgLog, error) { return &pgLog{h: h}, nil }

func (l *pgLog) watch(_ context.Context, key string) error {
	if len(key) < len(watchedPrefix) || key[:len(watchedPrefix)] != watchedPrefix {
		return fmt.Errorf("chaos: key %q is not logged: the commit log of a run on PostgreSQL logs keys starting with %q", key, watchedPrefix)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	return nil
}

func (l *pgLog) commits(ctx context.Context) ([]check.Commit, error) {
	l.mu.Lock()
	keys := slices.Clone(l.keys)
	l.mu.Unlock()
	bkeys := make([][]byte, len(keys))
	for i, k := range keys {
		bkeys[i] = []byte(k)
	}
	_, log, _ := l.h.pgNames()
	rows, err := l.h.pg.Query(ctx, `SELECT seq, key, value, op, at FROM `+log+` WHERE key = ANY($1) ORDER BY seq`, bkeys)
	if err != nil {
		return nil, fmt.Errorf("chaos: read the commit log: %w", err)
	}
	defer rows.Close()
	var out []check.Commit
	for rows.Next() {
		var (
			seq        int64
			key, value []byte
			op         string
			at         time.Time
		)
		if err := rows.Scan(&seq, &key, &value, &op, &at); err != nil {
			return nil, fmt.Errorf("chaos: read the commit log: %w", err)
		}
		c := check.Commit{At: at, Revision: uint64(seq), Key: string(key)}
		if op == "DELETE" {
			c.Deleted = true
		} else {
			c.Hash = bench.ValueHash(value)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (l *pgLog) close() {}
