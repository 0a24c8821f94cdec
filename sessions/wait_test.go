package sessions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeHost has a number of open sessions set by the test.
type fakeHost struct {
	mu      sync.Mutex
	open    int
	changed chan struct{}
	calls   int
	err     error
}

func newFakeHost(open int) *fakeHost { return &fakeHost{open: open, changed: make(chan struct{})} }

func (f *fakeHost) set(open int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = open
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeHost) StopAccepting(context.Context) error { return nil }
func (f *fakeHost) Stop()                               {}

func (f *fakeHost) SessionsFinished(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	for {
		f.mu.Lock()
		open, ch, err := f.open, f.changed, f.err
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeHost) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestWaitForSessionsEndsOnceEveryHostIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newFakeHost(1), newFakeHost(2)
		done := make(chan error, 1)
		go func() { done <- WaitForSessions(t.Context(), time.Now().Add(time.Minute), a, b) }()
		synctest.Wait()
		a.set(0)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("done (%v) while b has sessions", err)
		default:
		}
		b.set(0)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if a.callCount() != 2 || b.callCount() != 2 {
			t.Fatalf("rounds: a %d, b %d, want 2 each", a.callCount(), b.callCount())
		}
	})
}

func TestWaitForSessionsStopsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := WaitForSessions(t.Context(), start.Add(300*time.Millisecond), newFakeHost(0), newFakeHost(1))
		if !errors.Is(err, ErrSessionsOpen) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrSessionsOpen and DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Fatalf("returned after %s, want exactly the deadline", took)
		}
	})
}

func TestWaitForSessionsWithoutHostsOrTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if err := WaitForSessions(t.Context(), time.Now()); err != nil {
			t.Fatalf("no hosts: %v", err)
		}
		h := newFakeHost(0)
		if err := WaitForSessions(t.Context(), time.Now(), h); !errors.Is(err, ErrSessionsOpen) {
			t.Fatalf("no time: %v, want ErrSessionsOpen", err)
		}
		if h.callCount() != 0 {
			t.Fatal("a host was asked although no time was left")
		}
	})
}

// The reason for two rounds: a reply parked on a host that already reported done.
func TestWaitForSessionsCoversASessionOpenedOnAHostAlreadyDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		overflow, primary := newFakeHost(0), newFakeHost(1)
		done := make(chan error, 1)
		go func() { done <- WaitForSessions(t.Context(), time.Now().Add(time.Minute), overflow, primary) }()
		synctest.Wait() // round 1: overflow reported done, primary still answering
		overflow.set(1) // the primary's answer is parked on the overflow host
		primary.set(0)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("done (%v) while the parked reply is open", err)
		default:
		}
		overflow.set(0) // its caller read and closed it
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestWaitForSessionsCountsAFailedHostAsFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken, fine := newFakeHost(1), newFakeHost(0)
		boom := errors.New("boom")
		broken.err = boom
		err := WaitForSessions(t.Context(), time.Now().Add(time.Minute), broken, fine)
		if !errors.Is(err, boom) || errors.Is(err, ErrSessionsOpen) {
			t.Fatalf("err = %v, want boom and not ErrSessionsOpen", err)
		}
		if broken.callCount() != 2 || fine.callCount() != 2 {
			t.Fatalf("rounds: %d and %d, want 2 each", broken.callCount(), fine.callCount())
		}
	})
}
