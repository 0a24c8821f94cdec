package postgres

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const urlEnv = "ABI_TEST_POSTGRES_URL"

// pool connects to the test database, or skips the test.
func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " is not set; set it to a PostgreSQL URL to run the postgres backend tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		t.Fatalf("%s=%s: %v", urlEnv, url, err)
	}
	t.Cleanup(p.Close)
	return p
}

var tables atomic.Int64

// newStore returns a store on a table of its own, dropped when the test ends.
func newStore(t *testing.T, p *pgxpool.Pool) *Store {
	t.Helper()
	table := fmt.Sprintf("kvtest_%d_%d", os.Getpid(), tables.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, p, Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
		if _, err := p.Exec(ctx, "DELETE FROM "+EpochTable+" WHERE name = $1", table); err != nil {
			t.Errorf("delete the epoch of %s: %v", table, err)
		}
		if _, err := p.Exec(ctx, "DELETE FROM "+StoresTable+" WHERE name = $1", table); err != nil {
			t.Errorf("delete the id of %s: %v", table, err)
		}
	})
	return s
}

// TestEpochContract runs the epoch contract, each store on a pool of its own as each
// engine has.
func TestEpochContract(t *testing.T) {
	p := pool(t)
	kvtest.RunEpoch(t, func(t *testing.T) func(t *testing.T) kvtest.Fenced {
		table := newStore(t, p).table
		return func(t *testing.T) kvtest.Fenced {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := Open(ctx, os.Getenv(urlEnv), Config{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		}
	})
}

func TestContract(t *testing.T) {
	p := pool(t)
	// The database's clock cannot be injected: a short real TTL, expired by the database.
	kvtest.Run(t, func(t *testing.T) keyvalue.Store { return newStore(t, p) },
		kvtest.WithRealTTL(200*time.Millisecond, 10*time.Second))
}

// Two engines creating the table at once both succeed and share it.
func TestConcurrentCreate(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := New(ctx, p, Config{Table: s.table})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Writes delete expired rows in batches.
func TestSweep(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Set(ctx, "expired", []byte("v"), time.Microsecond); err != nil {
		t.Fatal(err)
	}
	s.writes.Store(sweepEvery - 1) // the next write sweeps
	if err := s.Set(ctx, "trigger", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{s.table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d rows after the sweep, want 1", n)
	}
}

func TestBadTableName(t *testing.T) {
	p := pool(t)
	if _, err := New(context.Background(), p, Config{Table: "Robert'); DROP TABLE x;--"}); err == nil {
		t.Fatal("New accepted a bad table name")
	}
}

func TestLocalStorage(t *testing.T) {
	if got := (&Store{}).LocalStorage(); got != "" {
		t.Fatalf("LocalStorage = %q, want shared", got)
	}
}
