package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/anthdm/hollywood/actor"
)

// slowStopStore is a Store whose watches, once cancelled, take until release is closed
// to end: a watch of a broker slow to answer.
type slowStopStore struct {
	lease.Store
	release chan struct{}
}

type slowWatcher struct {
	lease.Watcher
	out chan lease.Record
}

func (w *slowWatcher) Updates() <-chan lease.Record { return w.out }

func (s *slowStopStore) Watch(ctx context.Context) (lease.Watcher, error) {
	w, err := s.Store.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan lease.Record)
	go func() {
		defer close(out)
		for r := range w.Updates() {
			select {
			case out <- r:
			case <-ctx.Done():
			}
		}
		<-s.release
	}()
	return &slowWatcher{Watcher: w, out: out}, nil
}

// restarts reports the Restarted events of n's engine.
func restarts(t *testing.T, n *node) <-chan *actor.PID {
	ch := make(chan *actor.PID, 4)
	ev := n.e.SpawnFunc(func(c *actor.Context) {
		if r, ok := c.Message().(Restarted); ok {
			ch <- r.PID
		}
	}, "events")
	n.e.Subscribe(ev)
	t.Cleanup(func() { n.e.Unsubscribe(ev); <-n.e.Poison(ev).Done() })
	return ch
}

// TestContenderNeverWaitsForItsWatch: a contender whose watch is slow to end is
// restarted at once (its Receive cancels the watch and returns), watches again at once
// (a foreign write still ends the holder), and Ownership.Stop is what waits for the old
// watch to end.
func TestContenderNeverWaitsForItsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		store := &slowStopStore{Store: mem, release: make(chan struct{})}
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		restarted := restarts(t, a)
		synctest.Wait()

		a.e.Send(a.o.Child(ContenderName), Kill{Reason: "test"})
		select {
		case <-restarted:
		case <-time.After(testLease):
			t.Fatal("the contender did not restart: its Receive waits for the watch to end")
		}
		synctest.Wait()
		mem.Put(leasetest.Holder("thief", ""))
		a.waitState(lease.StateLost, testLease)

		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stopped <- a.o.Stop(ctx)
		}()
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while a watch goroutine still runs", err)
		default:
		}
		close(store.release)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop = %v", err)
		}
	})
}

// TestStandbyTakesOverAfterAFailedTakeoverRead: a standby whose takeover read fails
// retries it lease/4 later and takes the dead holder's lease over. Before the machine's
// retry-wait sub-states, its deadlines still named the takeover that had passed, the
// contender's timer was not armed again for the same instant, and the standby waited
// for ever.
func TestStandbyTakesOverAfterAFailedTakeoverRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		a := startNode(t, mem, leasetest.Holder("a", "v1"))
		a.waitState(lease.StateServing, time.Second)
		b := startNode(t, flaky, leasetest.Holder("b", "v2"))
		b.waitState(lease.StateStandby, time.Second)
		a.stop() // a crash: no release
		flaky.Fail(true)
		time.Sleep(testLease + testLease/8) // b's takeover read has failed
		synctest.Wait()
		if s := b.o.Status(); s.State != lease.StateStandby {
			t.Fatalf("b is %v while the store fails, want standby", s.State)
		}
		flaky.Fail(false)
		b.waitState(lease.StateServing, testLease)
	})
}
