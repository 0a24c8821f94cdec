package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// stopAccepted is the journal's stop-accepting lines.
func stopAccepted(j *journal) []string {
	return slices.DeleteFunc(j.all(), func(l string) bool { return !strings.Contains(l, "stop-accepting") })
}

// The members stop accepting only once the lease names a new holder and the Successor
// check confirms that holder answers; until then we serve on, released.
func TestSuccessorPhaseKeepsServingUntilTheNewHolderAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var j journal
		p := member(n.e, "primary", &j, store, 10*time.Millisecond)
		asked := make(chan lease.Holder, 1)
		answers := make(chan struct{})
		var phases []Phase
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: 10 * time.Second,
			Successor: func(ctx context.Context, h lease.Holder) error {
				asked <- h
				select {
				case <-answers:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
			OnPhase: func(p Phase, d time.Duration) { phases = append(phases, p) }})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		done := make(chan error, 1)
		go func() { done <- root.Handover(context.Background()) }()
		synctest.Wait()
		if root.Phase() != PhaseSuccessor || !read(t, store).Free() {
			t.Fatalf("phase %s, lease %v: want the successor phase after the release", root.Phase(), read(t, store))
		}
		if got := stopAccepted(&j); len(got) > 0 || len(asked) > 0 {
			t.Fatalf("with no new holder: members told %v, successor asked %d times", got, len(asked))
		}

		time.Sleep(50 * time.Millisecond) // the standby takes the lease a little later
		b := leasetest.Holder("b", "v2")
		if _, err := store.Create(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if got := <-asked; got != b {
			t.Fatalf("the successor check was asked about %v, want %v", got, b)
		}
		synctest.Wait()
		if got := stopAccepted(&j); len(got) > 0 {
			t.Fatalf("members told %v before the new holder answered", got)
		}
		close(answers)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := stopAccepted(&j); fmt.Sprint(got) != "[primary stop-accepting (lease free: false)]" {
			t.Fatalf("members were told %v", got)
		}
		if fmt.Sprint(phases) != fmt.Sprint([]Phase{PhaseRelease, PhaseSuccessor, PhaseDrain, PhaseSessions, PhaseStop, PhaseDrained}) {
			t.Fatalf("phases %v", phases)
		}
		<-n.e.Poison(p).Done()
		closeRoot(t, root)
	})
}

// With no successor the members stop accepting at the bound: lease/4 after the
// release, or half the drain when that is shorter; drain_seconds 0 waits for nothing.
//
// With the roll call (AnyStandby) the phase is skipped when no engine stands by, and
// ends once the roll call says so when it answers late; a standby that answers but
// never takes the lease leaves the bound as it is. Before the roll call, every lone
// engine served on for lease/4 after its release (5 s with the default lease).
func TestSuccessorPhaseEndsAtItsBound(t *testing.T) {
	answer := func(after time.Duration, any bool) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			select {
			case <-time.After(after):
				return any, nil
			case <-ctx.Done():
				return false, nil
			}
		}
	}
	for _, tc := range []struct {
		name        string
		drain, want time.Duration
		standby     func(context.Context) (bool, error)
	}{
		{"", 10 * time.Second, testLease / 4, nil},
		{"", 200 * time.Millisecond, 100 * time.Millisecond, nil},
		{"", 0, 0, nil},
		{", nobody stands by", 10 * time.Second, 0, answer(0, false)},
		{", the roll call ends late", 10 * time.Second, 40 * time.Millisecond, answer(40*time.Millisecond, false)},
		{", a standby that never comes", 10 * time.Second, testLease / 4, answer(0, true)},
	} {
		t.Run(fmt.Sprint("drain ", tc.drain, tc.name), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := leasetest.NewMemStore()
				n := startNode(t, store, leasetest.Holder("a", ""))
				var j journal
				p := member(n.e, "primary", &j, store, 10*time.Millisecond)
				var released time.Time
				root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: tc.drain,
					Successor: func(ctx context.Context, h lease.Holder) error {
						t.Errorf("asked about %v: nobody took the lease", h)
						return nil
					},
					AnyStandby: tc.standby,
					OnPhase: func(p Phase, d time.Duration) {
						if p == PhaseRelease {
							released = time.Now()
						}
					}})
				if err != nil {
					t.Fatal(err)
				}
				n.waitState(lease.StateServing, time.Second)
				go func() { _ = root.Handover(context.Background()) }()
				for len(stopAccepted(&j)) == 0 && root.Phase() != PhaseDone {
					synctest.Wait()
					if len(stopAccepted(&j)) == 0 && root.Phase() != PhaseDone {
						time.Sleep(time.Millisecond)
					}
				}
				if got := time.Since(released); got != tc.want {
					t.Fatalf("members stopped accepting %s after the release, want %s", got, tc.want)
				}
				if _, err := root.view.Wait(context.Background(), func(v rootView) bool { return v.ended }); err != nil {
					t.Fatal(err)
				}
				<-n.e.Poison(p).Done()
				closeRoot(t, root)
			})
		})
	}
}

// drain_seconds count from the release, not from the end of the wait for a successor:
// a member that never drains is stopped drain after the release.
func TestDrainDeadlineCountsFromTheRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var j journal
		stuck := member(n.e, "stuck", &j, store, time.Hour)
		const drain = time.Second
		var released time.Time
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{stuck}, Drain: drain,
			Successor: func(ctx context.Context, _ lease.Holder) error { <-ctx.Done(); return ctx.Err() },
			OnPhase: func(p Phase, d time.Duration) {
				if p == PhaseRelease {
					released = time.Now()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		if err := root.Handover(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := j.all(); !slices.Contains(got, "stuck stop") {
			t.Fatalf("members were told %v", got)
		}
		// The stop comes at the drain deadline; the ownership's drained mark after it
		// takes no fake time.
		if got := time.Since(released); got != drain {
			t.Fatalf("the stuck member was stopped %s after the release, want the %s drain", got, drain)
		}
		<-n.e.Poison(stuck).Done()
		closeRoot(t, root)
	})
}
