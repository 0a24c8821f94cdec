package bbolt

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	clock := kvtest.NewClock()
	kvtest.Run(t, func(t *testing.T) keyvalue.Store {
		return open(t, filepath.Join(t.TempDir(), "kv.db"), WithNow(clock.Now))
	}, kvtest.WithClock(clock))
}

// Values and their TTLs survive closing and reopening the file.
func TestDurable(t *testing.T) {
	clock := kvtest.NewClock()
	path := filepath.Join(t.TempDir(), "kv.db")
	ctx := context.Background()
	s, err := Open(path, WithNow(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "t", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, WithNow(clock.Now))
	if v, found, err := s.Get(ctx, "k"); err != nil || !found || string(v) != "v" {
		t.Fatalf("after reopen: %q %v %v", v, found, err)
	}
	clock.Advance(time.Minute)
	if _, found, err := s.Get(ctx, "t"); err != nil || found {
		t.Fatalf("expired key after reopen: found=%v err=%v", found, err)
	}
}

// Writes sweep expired entries and their index entries from the file.
func TestSweepRemovesExpired(t *testing.T) {
	clock := kvtest.NewClock()
	s := open(t, filepath.Join(t.TempDir(), "kv.db"), WithNow(clock.Now))
	ctx := context.Background()
	for i := range 10 {
		if err := s.Set(ctx, fmt.Sprint("old-", i), []byte("v"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Rewriting a key without TTL leaves a stale index entry that must not delete it.
	if err := s.Set(ctx, "old-0", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.Set(ctx, "trigger", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(valuesBucket).Stats().KeyN; n != 2 {
			return fmt.Errorf("%d values, want 2 (old-0 and trigger)", n)
		}
		if n := tx.Bucket(expiryBucket).Stats().KeyN; n != 0 {
			return fmt.Errorf("%d index entries left", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, found, err := s.Get(ctx, "old-0"); err != nil || !found || string(v) != "kept" {
		t.Fatalf("rewritten key: %q %v %v", v, found, err)
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.db")
	open(t, path)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Open: %v, want a locked error", err)
	}
}

func TestLocalStorage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.db")
	if got := open(t, path).LocalStorage(); got != "file at "+path {
		t.Fatalf("LocalStorage = %q", got)
	}
}
