package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// waitBlocked waits until a statement containing what waits for a lock.
func waitBlocked(t *testing.T, ctx context.Context, p *pgxpool.Pool, what string) {
	t.Helper()
	testwait.For(t, 10*time.Second, "a statement on "+what+" waiting for a lock", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, what).Scan(&n)
		return err == nil && n > 0
	})
}

// A write under way when another engine advances the epoch either commits before the
// advance or waits for it and is refused: the check is at the commit. Here the advance
// holds the row (uncommitted) while the old engine writes; the write waits, then sees
// the new epoch and applies nothing.
func TestWriteWaitingBehindAnAdvanceIsRefused(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE `+EpochTable+` SET epoch = 2 WHERE name = $1`, s.table); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Set(ctx, "k", []byte("late"), 0) }()
	waitBlocked(t, ctx, p, s.table)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = testwait.Recv(t, done, 10*time.Second, "the write that waited")
	if !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("a write that waited for an advance = %v, want fenced", err)
	}
	if _, found, err := s.Get(ctx, "k"); err != nil || found {
		t.Fatalf("Get = %v, %v; want the refused write absent", found, err)
	}
}

// An advance waits for the writes holding the row under the old epoch to commit.
func TestAdvanceWaitsForWritesUnderWay(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A write under epoch 1 that has checked the row and not committed yet.
	if _, err := tx.Exec(ctx, `SELECT epoch FROM `+EpochTable+` WHERE name = $1 FOR SHARE`, s.table); err != nil {
		t.Fatal(err)
	}
	other, err := New(ctx, p, Config{Table: s.table})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- other.AdoptEpoch(ctx, 2) }()
	waitBlocked(t, ctx, p, EpochTable)
	select {
	case err := <-done:
		t.Fatalf("the advance returned (%v) while a write under the old epoch held the row", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, done, 10*time.Second, "the advance"); err != nil {
		t.Fatal(err)
	}
}

// Dropping and recreating the table keeps its epoch (the row lives in EpochTable); a
// row reset by hand loses it: writes are refused, retryable, until a probe adopts the
// held epoch again.
func TestEpochOutlivesTheTable(t *testing.T) {
	p := pool(t)
	old := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cur, err := New(ctx, p, Config{Table: old.table})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cur.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "DROP TABLE "+pgx.Identifier{old.table}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, p, Config{Table: old.table}); err != nil {
		t.Fatal(err)
	}
	if err := old.Set(ctx, "k", []byte("old"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Set under epoch 1 on the recreated table = %v, want fenced", err)
	}
	if err := cur.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}

	if _, err := p.Exec(ctx, "UPDATE "+EpochTable+" SET epoch = 0 WHERE name = $1", old.table); err != nil {
		t.Fatal(err)
	}
	err = cur.Set(ctx, "k", []byte("w"), 0)
	var pe *protocol.Error
	if !errors.Is(err, epoch.ErrLost) || !errors.As(err, &pe) || !pe.Retryable {
		t.Fatalf("Set with the epoch row reset = %v, want lost, retryable", err)
	}
	if _, err := cur.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.Set(ctx, "k", []byte("w"), 0); err != nil {
		t.Fatalf("Set after the probe: %v", err)
	}
	if err := old.Set(ctx, "k", []byte("old"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Set under epoch 1 = %v, want fenced", err)
	}
}

// The sweep of expired rows keeps a row that a write set again while the sweep waited
// for it. (Before, the sweep checked expiry only in its subquery, whose answer a
// waiting DELETE does not recompute, and deleted the row just set.)
func TestSweepKeepsARowSetMeanwhile(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Set(ctx, "k", []byte("expired"), time.Microsecond); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "UPDATE "+pgx.Identifier{s.table}.Sanitize()+" SET value = 'new', expires_at = NULL WHERE key = 'k'"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.pool.Exec(ctx, s.qSweep); done <- err }()
	waitBlocked(t, ctx, p, "LIMIT")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, done, 10*time.Second, "the sweep"); err != nil {
		t.Fatal(err)
	}
	if v, found, err := s.Get(ctx, "k"); err != nil || !found || string(v) != "new" {
		t.Fatalf("Get after the sweep = %q, %v, %v; want the row set meanwhile", v, found, err)
	}
}
