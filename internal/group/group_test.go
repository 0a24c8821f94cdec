package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/testwait"
	"go.uber.org/goleak"
)

// TestGroupWaitIsBoundedAndNamesWhatRuns: Wait returns once every goroutine has
// returned; bounded by a context that ends first, it names how many still run.
func TestGroupWaitIsBoundedAndNamesWhatRuns(t *testing.T) {
	g := New()
	release, started := make(chan struct{}), make(chan struct{}, 2)
	for range 2 {
		if !g.Go(func() { started <- struct{}{}; <-release }) {
			t.Fatal("an open group refused a goroutine")
		}
	}
	testwait.Recv(t, started, 10*time.Second, "the first goroutine")
	testwait.Recv(t, started, 10*time.Second, "the second goroutine")
	if n := g.Running(); n != 2 {
		t.Fatalf("Running %d, want 2", n)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	err := g.Wait(ended)
	if !errors.Is(err, context.Canceled) || err.Error() != "2 still running: context canceled" {
		t.Fatalf("Wait with its context ended while two run: %v", err)
	}
	close(release)
	ctx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := g.Wait(ctx); err != nil || g.Running() != 0 {
		t.Fatalf("Wait after the goroutines returned: %v, %d running", err, g.Running())
	}
}

// TestGroupShutRefusesNewGoroutines: a shut group runs nothing new (its owner is
// waiting for it), and takes goroutines again once opened.
func TestGroupShutRefusesNewGoroutines(t *testing.T) {
	g := New()
	g.Shut()
	ran := make(chan struct{}, 1)
	if g.Go(func() { ran <- struct{}{} }) || g.Running() != 0 {
		t.Fatal("a shut group took a goroutine")
	}
	g.Open()
	if !g.Go(func() { ran <- struct{}{} }) {
		t.Fatal("a reopened group refused a goroutine")
	}
	testwait.Recv(t, ran, 10*time.Second, "the goroutine of the reopened group")
	select {
	case <-ran:
		t.Fatal("the refused goroutine ran")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
