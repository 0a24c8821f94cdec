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
