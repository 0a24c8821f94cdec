package notify

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoadAndWatch(t *testing.T) {
	n := New(1)
	v, changed := n.Watch()
	if v != 1 || n.Load() != 1 {
		t.Fatalf("Watch = %d, Load = %d, want 1", v, n.Load())
	}
	select {
	case <-changed:
		t.Fatal("changed closed before a Store")
	default:
	}
	n.Store(2)
	select {
	case <-changed:
	default:
		t.Fatal("changed not closed by Store")
	}
	if n.Load() != 2 {
		t.Fatalf("Load = %d after Store(2)", n.Load())
	}
}

func TestUpdateWithoutChangeWakesNobody(t *testing.T) {
	n := New("a")
	_, changed := n.Watch()
	n.Update(func(s string) (string, bool) { return s, false })
	select {
	case <-changed:
		t.Fatal("an update without a change woke the waiters")
	default:
	}
	n.Update(func(s string) (string, bool) { return s + "b", true })
	<-changed
	if n.Load() != "ab" {
		t.Fatalf("Load = %q, want ab", n.Load())
	}
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	n := New(0)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 100 {
				n.Update(func(v int) (int, bool) { return v + 1, true })
			}
		})
	}
	wg.Wait()
	if n.Load() != 5000 {
		t.Fatalf("Load = %d after 5000 increments", n.Load())
	}
}

func TestWait(t *testing.T) {
	n := New(0)
	done := make(chan int)
	go func() {
		v, err := n.Wait(context.Background(), func(v int) bool { return v >= 3 })
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	for i := 1; i <= 3; i++ {
		n.Store(i)
	}
	if v := <-done; v != 3 {
		t.Fatalf("Wait = %d, want 3", v)
	}
	if v, err := n.Wait(context.Background(), func(v int) bool { return v == 3 }); v != 3 || err != nil {
		t.Fatalf("Wait on a value that holds already = %d, %v", v, err)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	n := New(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	v, err := n.Wait(ctx, func(int) bool { return false })
	if v != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %d, %v; want 0 and the deadline", v, err)
	}
}
