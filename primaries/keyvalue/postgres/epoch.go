package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/protocol"
)

// records is a table's epoch row in EpochTable; it implements epoch.Records. The row's
// epoch is its own revision (0: none adopted).
type records struct {
	pool  *pgxpool.Pool
	table string // EpochTable, quoted
	name  string // the keyvalue table the row belongs to
}

func (r records) ReadEpoch(ctx context.Context) (epoch.Record, error) {
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT epoch FROM `+r.table+` WHERE name = $1`, r.name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) || n == 0 {
		return epoch.Record{}, nil
	}
	if err != nil {
		return epoch.Record{}, err
	}
	return epoch.Record{Epoch: uint64(n), Rev: uint64(n)}, nil
}

// WriteEpoch advances the row from over to n. The update locks the row (as FOR
// UPDATE does), so it waits for the writes that hold it FOR SHARE under the old epoch
// to commit; writes that come after see n.
func (r records) WriteEpoch(ctx context.Context, n uint64, over epoch.Record) (epoch.Record, error) {
	tag, err := r.pool.Exec(ctx, `INSERT INTO `+r.table+` (name, epoch) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET epoch = EXCLUDED.epoch WHERE `+r.table+`.epoch = $3`,
		r.name, int64(n), int64(over.Epoch))
	if err != nil {
		return epoch.Record{}, err
	}
	if tag.RowsAffected() == 0 {
		return epoch.Record{}, fmt.Errorf("%s row %s: %w", r.table, r.name, epoch.ErrMoved)
	}
	return epoch.Record{Epoch: n, Rev: n}, nil
}

// where names the table in errors.
func (s *Store) where() string { return "PostgreSQL table " + s.table }

// AdoptEpoch adopts the epoch the engine serves under (package internal/epoch): the
// table's epoch is advanced to n when it is older, used as it is when it is n, and the
// adoption fails, matching epoch.ErrFenced, when the table holds a newer epoch. From
// then on every write carries it. Safe for concurrent use.
func (s *Store) AdoptEpoch(ctx context.Context, n uint64) error {
	if err := s.held.Adopt(ctx, s.epochs, s.where(), n); err != nil {
		return fmt.Errorf("keyvalue postgres: %w", err)
	}
	return nil
}

// Probe adopts the held epoch again when the table's epoch row lost it (reset or
// deleted by hand); recreated is always false. The engine probes after a call failed.
func (s *Store) Probe(ctx context.Context) (recreated bool, err error) {
	if _, err := s.held.Restore(ctx, s.epochs, s.where()); err != nil {
		return false, fmt.Errorf("keyvalue postgres: %w", err)
	}
	return false, nil
}

// write runs a fenced statement (queries) under the held epoch: exec gets the epoch
// to pass (the one place this backend attaches its token) and returns the epoch the
// statement found and whether it wrote. A statement that found another epoch wrote
// nothing: it is sent once more when this backend's own epoch moved on meanwhile,
// and otherwise answered fenced (a newer epoch) or lost, UNAVAILABLE, retryable.
func (s *Store) write(ctx context.Context, op, key string, exec func(ctx context.Context, tok int64) (found int64, done bool, err error)) (bool, error) {
	resent := false
	for {
		tok := s.held.Load()
		found, done, err := exec(ctx, int64(tok.Epoch))
		if err == nil && uint64(found) != tok.Epoch && failpoint.On(s.fp, failpoint.SkipEpoch) {
			// skip-epoch: the statement again, under the epoch the row holds.
			found, done, err = exec(ctx, found)
			tok.Epoch = uint64(found)
		}
		if err != nil {
			return false, s.writeError(op, key, err)
		}
		if uint64(found) == tok.Epoch {
			s.wrote(ctx)
			return done, nil
		}
		verdict, jerr := s.held.Judge(ctx, s.epochs, s.where(), tok)
		switch verdict {
		case epoch.Resend:
			if !resent {
				resent = true
				continue
			}
		case epoch.Stale, epoch.Lost:
			return false, epoch.Refused(protocol.Refused("keyvalue %s %.64q: refused by its epoch, so it applied nothing: %v", op, key, jerr), jerr)
		}
		if errors.Is(jerr, context.Canceled) || errors.Is(jerr, context.DeadlineExceeded) {
			return false, jerr
		}
		return false, protocol.Refused("keyvalue %s %.64q: PostgreSQL table %s is at epoch %d, not this engine's %d, so the write applied nothing (%v)", op, key, s.table, found, tok.Epoch, jerr)
	}
}

// row runs a fenced statement and scans its answer.
func (s *Store) row(ctx context.Context, q string, args ...any) (found int64, done bool, err error) {
	err = s.pool.QueryRow(ctx, q, args...).Scan(&found, &done)
	return found, done, err
}
