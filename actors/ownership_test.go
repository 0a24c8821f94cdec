package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testLease   = time.Second
	testStandby = 5 * time.Second
)

// node is one engine's ownership: its own hollywood engine, the ownership tree and a
// subscriber that records the role broadcasts.
type node struct {
	t       *testing.T
	e       *actor.Engine
	o       *Ownership
	panics  func() // stops the watch of unexpected panics
	sub     *actor.PID
	mu      sync.Mutex
	roles   []any
	roledAt []time.Time // when each role arrived
}

func startNode(t *testing.T, store lease.Store, me lease.Holder) *node {
	t.Helper()
	return startNodeWith(t, store, lease.Config{Me: me, Lease: testLease, StandbyTimeout: testStandby})
}

func startNodeWith(t *testing.T, store lease.Store, cfg lease.Config) *node {
	t.Helper()
	return startNodeFrom(t, OwnershipConfig{Store: store, Lease: cfg})
}

// startNodeFrom starts a node whose ownership has oc, with the test's event hook and
// subscriber.
func startNodeFrom(t *testing.T, oc OwnershipConfig) *node {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, e: e}
	// A panic that no Kill asked for is a bug, even when Recover survives it.
	n.panics = WatchPanics(e, func(p Panicked) {
		if !strings.HasPrefix(fmt.Sprint(p.Reason), "killed: ") {
			t.Errorf("%v panicked: %v\n%s", p.PID, p.Reason, p.Stack)
		}
	})
	n.sub = e.SpawnFunc(func(c *actor.Context) {
		switch m := c.Message().(type) {
		case Serving, EpochChanged, StandingBy, Fenced, Lost, Released, ClaimFailed:
			n.mu.Lock()
			n.roles = append(n.roles, m)
			n.roledAt = append(n.roledAt, time.Now())
			n.mu.Unlock()
		}
	}, "subscriber")
	// The test hook on the machine's transition table: a move it does not allow fails
	// the test.
	oc.OnEvent = func(ev lease.Event) {
		if ev.Kind == lease.EventIllegalTransition {
			t.Errorf("the lease machine: %v", ev.Err)
		}
	}
	oc.Subscribers = []*actor.PID{n.sub}
	o, err := SpawnOwnership(e, oc)
	if err != nil {
		t.Fatal(err)
	}
	n.o = o
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.o.Stop(ctx); err != nil {
		n.t.Error(err)
	}
	<-n.e.PoisonCtx(ctx, n.sub).Done()
	n.panics()
}

// roleLog is what the subscriber received; inside a bubble it first lets every
// message in flight arrive.
func (n *node) roleLog() []any {
	synctest.Wait()
	return n.rolesNow()
}

// rolesNow is what the subscriber has received so far.
func (n *node) rolesNow() []any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]any(nil), n.roles...)
}

func (n *node) waitState(want lease.State, within time.Duration) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := n.o.WaitFor(ctx, func(s Status) bool { return s.State == want }); err != nil {
		n.t.Fatalf("%s: %v", want, err)
	}
}

func read(t *testing.T, s lease.Store) lease.Record {
	t.Helper()
	r, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFreeLeaseIsTakenAndRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", ""))
		state, err := a.o.Claim(context.Background())
		if err != nil || state != lease.StateServing {
			t.Fatalf("Claim = %v, %v", state, err)
		}
		first := read(t, store).Revision
		time.Sleep(testLease) // fake time: let one lease period pass
		synctest.Wait()
		if got := read(t, store).Revision; got < first+2 {
			t.Fatalf("revision after one lease = %d, want >= %d", got, first+2)
		}
		if !a.o.Gate().Valid() {
			t.Fatal("gate closed while serving")
		}
		if s := a.o.Status(); s.Holder.InstanceID != "engine-a" || s.Revision == 0 {
			t.Fatalf("status %+v", s)
		}
	})
}

func TestSecondEngineFailsNamingTheHolder(t *testing.T) {
	for _, rollout := range []string{"", "v1"} {
		t.Run("rollout "+rollout, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := leasetest.NewMemStore()
				a := startNode(t, store, leasetest.Holder("a", rollout))
				a.waitState(lease.StateServing, time.Second)
				before := read(t, store).Holder
				start := time.Now()
				b := startNode(t, store, leasetest.Holder("b", rollout))
				_, err := b.o.Claim(context.Background())
				var as *lease.AlreadyServingError
				if !errors.As(err, &as) || as.Holder.InstanceID != "engine-a" {
					t.Fatalf("Claim = %v, want AlreadyServingError naming a", err)
				}
				if took := time.Since(start); took > testLease/2 {
					t.Fatalf("refused after %s, want within lease/2", took)
				}
				if got := read(t, store).Holder; got != before {
					t.Fatalf("record changed to %v", got)
				}
				if b.o.Gate().Valid() {
					t.Fatal("a refused engine's gate is open")
				}
				if _, ok := b.roleLog()[0].(ClaimFailed); !ok {
					t.Fatalf("roles %v, want ClaimFailed", b.roleLog())
				}
			})
		})
	}
}

func TestDeadHolderIsTakenOverAfterOneLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		a.stop() // a crash: no release
		crashed := time.Now()
		b := startNode(t, store, leasetest.Holder("b", ""))
		b.waitState(lease.StateServing, 3*testLease)
		if took := time.Since(crashed); took < testLease*9/10 || took > testLease+testLease/2 {
			t.Fatalf("took over after %s, want about one lease (>= 0.9 lease)", took)
		}
	})
}

func TestStandbyTakesOverOnReleaseAndTimesOut(t *testing.T) {
	t.Run("release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", "v1"))
			a.waitState(lease.StateServing, time.Second)
			b := startNode(t, store, leasetest.Holder("b", "v2"))
			start := time.Now()
			if state, err := b.o.Claim(context.Background()); state != lease.StateStandby || err != nil {
				t.Fatalf("Claim = %v, %v", state, err)
			}
			if time.Since(start) != 0 {
				t.Fatalf("stood by after %s, want at once", time.Since(start))
			}
			time.Sleep(3 * testLease)
			if s := b.o.Status().State; s != lease.StateStandby {
				t.Fatalf("standby became %v while the holder lives", s)
			}
			released := time.Now()
			if s, err := a.o.Release(context.Background()); err != nil || s.State != lease.StateReleased {
				t.Fatalf("Release = %v, %v", s.State, err)
			}
			if !a.o.Gate().Valid() {
				t.Fatal("a released holder's gate refuses the calls it drains")
			}
			b.waitState(lease.StateServing, testLease)
			if took := time.Since(released); took > 300*time.Millisecond {
				t.Fatalf("took over %s after the release", took)
			}
			if r := read(t, store); r.Holder.InstanceID != "engine-b" {
				t.Fatalf("holder %v", r.Holder)
			}
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", "v1"))
			a.waitState(lease.StateServing, time.Second)
			b := startNode(t, store, leasetest.Holder("b", "v2"))
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*testStandby)
			defer cancel()
			s, err := b.o.WaitFor(ctx, func(s Status) bool { return s.Err != nil })
			if err != nil {
				t.Fatal(err)
			}
			var ste *lease.StandbyTimeoutError
			if !errors.As(s.Err, &ste) || ste.Holder.InstanceID != "engine-a" {
				t.Fatalf("err = %v", s.Err)
			}
			if took := time.Since(start); took < testStandby || took > testStandby+testLease {
				t.Fatalf("gave up after %s, want %s", took, testStandby)
			}
		})
	})
}

func TestFencesWithinHalfALeaseAndServesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFlaky(leasetest.NewMemStore())
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		store.Fail(true)
		a.waitState(lease.StateFenced, testLease)
		last := a.o.Status().LastRenewed
		if late := time.Since(last); late < testLease/2 || late > testLease/2+testLease/8 {
			t.Fatalf("fenced %s after the last successful renewal was sent, want lease/2", late)
		}
		if a.o.Gate().Valid() {
			t.Fatal("a fenced engine's gate is open")
		}
		store.Fail(false)
		a.waitState(lease.StateServing, testLease)
		roles := a.roleLog()
		if srv, ok := roles[len(roles)-1].(Serving); !ok || !srv.Restored {
			t.Fatalf("roles %v, want Serving{Restored} last", roles)
		}
		if _, ok := roles[len(roles)-2].(Fenced); !ok {
			t.Fatalf("roles %v, want Fenced before", roles)
		}
	})
}

func TestFencedHolderEndsLostWhenAnotherTookOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		a := startNode(t, flaky, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		b := startNode(t, mem, leasetest.Holder("b", "v2"))
		b.waitState(lease.StateStandby, time.Second)
		flaky.Fail(true)
		cut := time.Now()
		a.waitState(lease.StateFenced, testLease)
		fenced := time.Since(cut)
		b.waitState(lease.StateServing, 2*testLease)
		took := time.Since(cut)
		if fenced > took-testLease/4 {
			t.Fatalf("fenced at %s, takeover at %s: less than lease/4 apart", fenced, took)
		}
		flaky.Fail(false)
		a.waitState(lease.StateLost, testLease)
		roles := a.roleLog()
		if l, ok := roles[len(roles)-1].(Lost); !ok || l.Holder.InstanceID != "engine-b" {
			t.Fatalf("roles %v, want Lost naming b", roles)
		}
	})
}

func TestLostReplyDeletedLeaseAndForeignRelease(t *testing.T) {
	t.Run("lost reply keeps the lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := leasetest.NewMemStore()
			store := leasetest.NewFlaky(mem)
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, time.Second)
			store.LoseNextUpdateReply()
			time.Sleep(2 * testLease)
			for _, r := range a.roleLog() {
				if _, ok := r.(Fenced); ok {
					t.Fatalf("fenced after a lost reply: %v", a.roleLog())
				}
			}
			if s := a.o.Status(); s.State != lease.StateServing || read(t, mem).Holder.InstanceID != "engine-a" {
				t.Fatalf("status %v", s.State)
			}
		})
	})
	t.Run("deleted lease is taken again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, time.Second)
			if err := store.Delete(context.Background(), read(t, store).Revision); err != nil {
				t.Fatal(err)
			}
			time.Sleep(testLease)
			if r := read(t, store); r.Holder.InstanceID != "engine-a" || a.o.Status().State != lease.StateServing {
				t.Fatalf("record %v, state %v", r, a.o.Status().State)
			}
		})
	})
	t.Run("release never deletes another's lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, time.Second)
			store.Put(leasetest.Holder("thief", ""))
			if _, err := a.o.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r := read(t, store); r.Holder.InstanceID != "engine-thief" {
				t.Fatalf("record %v", r)
			}
		})
	})
}

func TestKilledChildrenAreSurvived(t *testing.T) {
	for _, name := range []string{RenewerName, FencerName, ContenderName, "ownership"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := leasetest.NewMemStore()
				a := startNode(t, store, leasetest.Holder("a", ""))
				a.waitState(lease.StateServing, time.Second)
				restarted := make(chan *actor.PID, 4)
				ev := a.e.SpawnFunc(func(c *actor.Context) {
					if r, ok := c.Message().(Restarted); ok {
						restarted <- r.PID
					}
				}, "events")
				a.e.Subscribe(ev)
				defer func() { a.e.Unsubscribe(ev); <-a.e.Poison(ev).Done() }()
				synctest.Wait()
				pid := a.o.PID()
				if name != "ownership" {
					pid = a.o.Child(name)
				}
				for range 3 {
					time.Sleep(testLease / 8)
					a.e.Send(pid, Kill{Reason: "test"})
					if got := <-restarted; !got.Equals(pid) {
						t.Fatalf("restarted %v, want %v", got, pid)
					}
				}
				rev := read(t, store).Revision
				time.Sleep(2 * testLease)
				if got := read(t, store).Revision; got < rev+4 {
					t.Fatalf("renewals stopped after killing the %s: revision %d -> %d", name, rev, got)
				}
				for _, r := range a.roleLog() {
					if _, ok := r.(Fenced); ok {
						t.Fatalf("fenced after killing the %s: %v", name, a.roleLog())
					}
				}
			})
		})
	}
}

func TestStandbyWatchSurvivesAKilledContender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", "v1"))
		a.waitState(lease.StateServing, time.Second)
		b := startNode(t, store, leasetest.Holder("b", "v2"))
		b.waitState(lease.StateStandby, time.Second)
		b.e.Send(b.o.Child(ContenderName), Kill{Reason: "test"})
		synctest.Wait()
		released := time.Now()
		if _, err := a.o.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.waitState(lease.StateServing, testLease)
		if took := time.Since(released); took > 300*time.Millisecond {
			t.Fatalf("took over %s after the release", took)
		}
	})
}

func TestSubscribeGetsTheCurrentRole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		got := make(chan any, 1)
		late := a.e.SpawnFunc(func(c *actor.Context) {
			if s, ok := c.Message().(Serving); ok {
				got <- s
			}
		}, "late")
		defer func() { <-a.e.Poison(late).Done() }()
		a.e.Send(a.o.PID(), Subscribe{PID: late})
		if s := (<-got).(Serving); s.Revision == 0 {
			t.Fatalf("Serving %+v", s)
		}
	})
}

// A subscriber that subscribes again, as a root restarted after a panic does, is told
// the current role each time but receives every later broadcast once, not once per
// subscription.
func TestSubscribingAgainDoesNotDuplicateBroadcasts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		var mu sync.Mutex
		released := 0
		sub := a.e.SpawnFunc(func(c *actor.Context) {
			if _, ok := c.Message().(Released); ok {
				mu.Lock()
				released++
				mu.Unlock()
			}
		}, "resubscriber")
		defer func() { <-a.e.Poison(sub).Done() }()
		for range 3 {
			a.e.Send(a.o.PID(), Subscribe{PID: sub})
		}
		if _, err := a.o.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if released != 1 {
			t.Fatalf("Released reached a subscriber that subscribed 3 times %d times, want 1", released)
		}
	})
}

// A tick that arrives after the release (a timer that fired late) leaves the draining
// gate open: the calls already received are still answered.
func TestLateTickKeepsTheDrainingGateOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, time.Second)
		if _, err := a.o.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.e.Send(a.o.PID(), tick{})
		a.e.Send(a.o.Child(FencerName), Kill{Reason: "late"}) // a restarted child resyncs too
		synctest.Wait()
		if !a.o.Gate().Valid() {
			t.Fatal("a late tick closed the draining gate")
		}
	})
}

// The holder watches its own key: a write not its own fences it at once, with no time
// passing (its next renewal is lease/4 away), and it goes on by the usual rules.
func TestForeignWriteFencesTheHolderAtOnce(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, time.Second)
			synctest.Wait()
			before := len(a.roleLog())
			at := time.Now()
			if err := store.Delete(context.Background(), read(t, store).Revision); err != nil {
				t.Fatal(err)
			}
			roles := a.roleLog()[before:]
			if time.Since(at) != 0 {
				t.Fatalf("%s passed", time.Since(at))
			}
			if len(roles) != 2 {
				t.Fatalf("roles after the delete %v, want Fenced then Serving{Restored}", roles)
			}
			if _, ok := roles[0].(Fenced); !ok {
				t.Fatalf("roles after the delete %v, want Fenced first", roles)
			}
			if s, ok := roles[1].(Serving); !ok || !s.Restored || read(t, store).Holder.InstanceID != "engine-a" {
				t.Fatalf("roles after the delete %v, record %v: want it created again and served", roles, read(t, store))
			}
		})
	})
	t.Run("another engine's value", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := leasetest.NewMemStore()
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, time.Second)
			at := time.Now()
			store.Put(leasetest.Holder("thief", ""))
			synctest.Wait()
			if s := a.o.Status(); s.State != lease.StateLost || time.Since(at) != 0 {
				t.Fatalf("state %v after %s, want lost at once", s.State, time.Since(at))
			}
			if a.o.Gate().Valid() {
				t.Fatal("gate open after the eviction")
			}
		})
	})
}
