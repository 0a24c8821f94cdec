package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	clock := kvtest.NewClock()
	kvtest.Run(t, func(*testing.T) keyvalue.Store { return New(WithNow(clock.Now)) }, kvtest.WithClock(clock))
}

// Expired entries are not kept forever: writes sweep them.
func TestSweepRemovesExpired(t *testing.T) {
	clock := kvtest.NewClock()
	s := New(WithNow(clock.Now))
	ctx := context.Background()
	for i := range sweepMin / 2 {
		if err := s.Set(ctx, fmt.Sprint("old-", i), []byte("v"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	for i := range sweepMin {
		if err := s.Set(ctx, fmt.Sprint("new-", i), []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	n := len(s.m)
	s.mu.RUnlock()
	if n != sweepMin {
		t.Fatalf("%d entries after the sweep, want %d (the expired ones gone)", n, sweepMin)
	}
}

func TestLocalStorage(t *testing.T) {
	if got := New().LocalStorage(); got != "this process" {
		t.Fatalf("LocalStorage = %q", got)
	}
}

// A shared read hands out the stored bytes without copying them, and a later write
// leaves the bytes a reader holds as they were.
func TestGetSharedIsTheStoredValue(t *testing.T) {
	s := New()
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	held, found, err := s.GetShared(ctx, "k")
	if err != nil || !found || string(held) != "first" {
		t.Fatalf("GetShared = %q, %v, %v", held, found, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.GetShared(ctx, "k") }); n != 0 {
		t.Errorf("GetShared allocates %v times, want 0", n)
	}
	copied, _, _ := s.Get(ctx, "k")
	copied[0] = 'X' // a Get's value is the caller's
	if err := s.Set(ctx, "k", []byte("second"), 0); err != nil {
		t.Fatal(err)
	}
	if string(held) != "first" {
		t.Fatalf("a write changed the bytes a reader held: %q", held)
	}
	if v, _, _ := s.GetShared(ctx, "k"); string(v) != "second" {
		t.Fatalf("after the write GetShared = %q", v)
	}
	if v, found, err := s.GetShared(ctx, ""); found || err == nil {
		t.Fatalf("an empty key: %q, %v, %v", v, found, err)
	}
}
