package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
)

func TestKindDropsIDAndParents(t *testing.T) {
	for id, want := range map[string]string{
		"root/engine":                          "root",
		"primary/keyvalue":                     "primary",
		"ownership/0123abcd":                   "ownership",
		"ownership/0123abcd/renewer/1":         "renewer",
		"transfer/abi.svc.x.v1.transfer@0123":  "transfer",
		"transfer/abi.svc.x@0123/session/4567": "session",
		"jobs/jobs":                            "jobs",
		"bare":                                 "bare",
	} {
		if got := Kind(actor.NewPID("local", id)); got != want {
			t.Errorf("Kind(%s) = %q, want %q", id, got, want)
		}
	}
}

// TestWatchPanicsSeesEachRecoveredPanicOnce is issue 10 item 4 at the actors: every
// panic Recover catches reaches the watcher once, with the actor and its stack; a
// panic of the watcher's own callback is not fed back to it.
func TestWatchPanicsSeesEachRecoveredPanicOnce(t *testing.T) {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan Panicked, 16)
	calls := 0
	stop := WatchPanics(e, func(p Panicked) {
		calls++
		seen <- p
		if calls == 2 {
			panic("the callback itself fails")
		}
	})
	defer stop()
	worker := e.SpawnFunc(func(*actor.Context) {}, "worker", SpawnOpts("w1")...)
	for range 3 {
		e.Send(worker, Kill{Reason: "test"})
	}
	for i := range 3 {
		select {
		case p := <-seen:
			if p.PID.ID != "worker/w1" || !strings.Contains(string(p.Stack), "Recover") || p.Reason != "killed: test" {
				t.Fatalf("panic %d: %v %v %.200s", i, p.PID, p.Reason, p.Stack)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("saw %d of 3 panics", i)
		}
	}
	stop()
	select {
	case p := <-seen:
		t.Fatalf("a fourth panic was reported: %v", p.PID)
	default:
	}
	<-e.Poison(worker).Done()
}
