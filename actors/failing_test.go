package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// A member of a holder that cannot serve is listed by the root, with why and since its
// first failure, through every retry, and forgotten once it serves; the state stays
// what the members carry out (not serving) meanwhile.
func TestRootListsFailingMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var refuse atomic.Bool
		refuse.Store(true)
		member := n.e.SpawnFunc(func(c *actor.Context) {
			if _, ok := c.Message().(Serve); ok {
				if refuse.Load() {
					c.Send(c.Sender(), ServeFailed{From: c.PID(), Err: errors.New("bucket refused")})
					return
				}
				c.Send(c.Sender(), Accepting{From: c.PID(), On: true})
			}
		}, "primary", actor.WithID("keyvalue"))
		core, logs := observer.New(zap.WarnLevel)
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{member}, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		defer closeRoot(t, root)
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		first := root.Failing()
		if len(first) != 1 || first[0].Member != "primary/keyvalue" || first[0].Err.Error() != "bucket refused" {
			t.Fatalf("Failing = %+v, want primary/keyvalue with its error", first)
		}
		time.Sleep(3 * serveRetry)
		synctest.Wait()
		if again := root.Failing(); len(again) != 1 || !again[0].Since.Equal(first[0].Since) {
			t.Fatalf("Failing after retries = %+v, want the same member since %s", again, first[0].Since)
		}
		if root.State() == lease.StateServing {
			t.Fatal("the root says serving while a member cannot serve")
		}
		if got := logs.FilterMessage("a member could not serve; retrying").Len(); got != 1 {
			t.Fatalf("%d warnings for one run of the same failure, want 1", got)
		}
		refuse.Store(false)
		time.Sleep(serveRetry)
		synctest.Wait()
		if got := root.Failing(); len(got) != 0 || root.State() != lease.StateServing {
			t.Fatalf("once the member serves: Failing = %+v, state %s; want none, serving", got, root.State())
		}
		<-n.e.Poison(member).Done()
	})
}
