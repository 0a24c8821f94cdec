package jsepoch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/jserr"
)

func TestInFlightTakesTheWantedShardOrTheNextFree(t *testing.T) {
	var f inFlight
	for _, c := range []struct {
		want, shards, got uint32
		claimed           bool
	}{
		{want: 5, shards: 64, got: 5, claimed: true},
		{want: 5, shards: 64, got: 6, claimed: true}, // 5 is taken
		{want: 63, shards: 64, got: 63, claimed: true},
		{want: 63, shards: 64, got: 0, claimed: true}, // wraps around
		{want: 2, shards: 4, got: 2, claimed: true},
		{want: 3, shards: 4, got: 3, claimed: true},
		{want: 3, shards: 4, got: 1, claimed: true},      // 0 and 2 taken, wraps to 1
		{want: 3, shards: 4, got: 3, claimed: false},     // all four taken: the hash alone
		{want: 70, shards: 128, got: 70, claimed: false}, // beyond what the set tracks
	} {
		got, claimed := f.take(c.want, c.shards)
		if got != c.got || claimed != c.claimed {
			t.Fatalf("take(%d of %d) = %d, %v; want %d, %v", c.want, c.shards, got, claimed, c.got, c.claimed)
		}
	}
	f.give(5)
	if got, claimed := f.take(5, 64); got != 5 || !claimed {
		t.Fatalf("take(5) after give(5) = %d, %v", got, claimed)
	}
}

// Writes of one Fence in flight together never expect the same shard, even when their
// subjects hash to one: on a replicated stream none is held back for another (10164).
// The control shows the writes do overlap at the store: the same subjects checked by
// hash alone are held back.
func TestFenceWritesInFlightClaimDifferentShards(t *testing.T) {
	ctx, j, r := replicatedStream(t)
	f := NewFence(r, "stream S")
	if err := f.Adopt(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const writers, rounds, controlRounds = 16, 20, 50
	subjects := subjectsOf(writers, false) // all of one shard by hash

	overlapped := false
	for range controlRounds {
		if burst(t, ctx, j, r, f.Held(), subjects) > 0 {
			overlapped = true
			break
		}
	}
	if !overlapped {
		t.Fatalf("%d bursts of %d writes checking one shard were never held back for each other: the writes never overlapped at the store, so this test cannot tell", controlRounds, writers)
	}
	for i := range rounds {
		if n := fenceBurst(t, ctx, j, f, subjects); n > 0 {
			t.Fatalf("round %d: %d of %d writes through one Fence were held back while another was in flight on their shard (10164)", i, n, writers)
		}
	}
	if got := f.inFlight.bits.Load(); got != 0 {
		t.Fatalf("shards still claimed after every write was answered: %064b", got)
	}
}

// fenceBurst sends one write on each subject through f at once, each sent exactly
// once by its sendTok, and counts those the store left undecided (10164).
func fenceBurst(t *testing.T, ctx context.Context, j js.JetStream, f *Fence, subjects []string) int {
	t.Helper()
	var carried, undecided atomic.Int32
	start := make(chan struct{})
	errs := make(chan error, len(subjects))
	var wg sync.WaitGroup
	for _, s := range subjects {
		wg.Go(func() {
			sent := false
			_, err := f.Write(ctx, func() string { return s }, func(tok Token) error {
				if sent { // once: a resend could be decided where the first was not
					return nil
				}
				sent = true
				m := &nats.Msg{Subject: s, Data: []byte("x")}
				f.Carry(m, tok)
				if carried.Add(1) == int32(len(subjects)) {
					close(start) // every write holds its shard: send them at once
				}
				<-start
				_, err := j.PublishMsg(ctx, m)
				if jserr.Classify(err) == jserr.Undecided {
					undecided.Add(1)
				}
				return err
			}, func(err error) error { return err })
			if err != nil {
				errs <- fmt.Errorf("a write on %s: %w", s, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(undecided.Load())
}
