package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/lease"
)

// The cascades of docs/architecture.md, each through the pure machine alone: what the
// root sends, arms, starts and ends on each input. The actors tests run the same
// cascades through the actor, a lease store and real members.

// sent renders an output's messages as "Type→member", in order.
func sent(out HandoverOutput) []string {
	var l []string
	for _, s := range out.Sends {
		name := fmt.Sprintf("%T", s.Msg)
		l = append(l, strings.TrimPrefix(name, "actors.")+"→"+s.To.ID)
	}
	return l
}

func wantSent(t *testing.T, what string, out HandoverOutput, want ...string) {
	t.Helper()
	if got := sent(out); !slices.Equal(got, want) {
		t.Fatalf("%s: sent %q, want %q", what, got, want)
	}
}

func logged(out HandoverOutput, msg string) bool {
	return slices.ContainsFunc(out.Logs, func(l LogLine) bool { return l.Msg == msg })
}

// TestMachineHandoverCascade: cascade 1 in full, with a jobs host, two members, a
// standby, a successor that answers and a wait for sessions.
func TestMachineHandoverCascade(t *testing.T) {
	f := newHM(t, hcfg{})
	out := f.step(Serving{Revision: 7, Epoch: 3})
	wantSent(t, "serving", out, "Serve→primary/p1", "Serve→primary/p2", "Serve→jobs")
	f.each(accepted, hmP1, hmP2, hmJobs)
	if v := f.m.view(rootView{}); !v.up || v.state != lease.StateServing || v.epoch != 3 {
		t.Fatalf("after every Accepting: %+v, want up, serving under 3", v)
	}

	out = f.step(Handover{})
	wantSent(t, "handover", out, "StopAccepting→jobs")
	if !out.StopRetries || len(out.Waits) != 1 || out.Waits[0].Kind != WaitRollCall || f.m.Phase() != PhaseJobs {
		t.Fatalf("handover: waits %+v, phase %s; want the roll call started, the jobs phase", out.Waits, f.m.Phase())
	}
	drainBy := f.now.Add(10 * time.Second)
	if d := out.Deadline; d.Phase != PhaseJobs || !d.At.Equal(drainBy) {
		t.Fatalf("jobs deadline %+v, want the drain deadline %s", d, drainBy)
	}
	f.step(rollCallDone{any: true})
	f.now = f.now.Add(time.Second)
	out = f.step(Drained{From: hmJobs})
	wantSent(t, "jobs drained", out, "Release→ownership")
	if len(out.Phases) != 1 || out.Phases[0] != (PhaseTime{PhaseJobs, time.Second}) {
		t.Fatalf("phases reported %+v, want jobs for 1s", out.Phases)
	}

	f.now = f.now.Add(time.Second)
	released := f.now
	out = f.step(Released{})
	wantSent(t, "released", out) // we go on serving
	if len(out.Waits) != 1 || out.Waits[0].Kind != WaitSuccessor || !out.Waits[0].Deadline.Equal(released.Add(hmLease/4)) ||
		f.m.Phase() != PhaseSuccessor {
		t.Fatalf("released: waits %+v in %s, want the wait for a successor until lease/4 after the release", out.Waits, f.m.Phase())
	}
	f.now = f.now.Add(300 * time.Millisecond)
	out = f.step(successorDone{holder: lease.Holder{InstanceID: "b"}})
	if !logged(out, "handover: the new holder answers at the broker; stopping accepting") {
		t.Fatalf("successor: logs %+v", out.Logs)
	}
	wantSent(t, "successor", out, "StopAccepting→primary/p1", "StopAccepting→primary/p2")
	for _, s := range out.Sends {
		if d := s.Msg.(StopAccepting).Deadline; !d.Equal(released.Add(10 * time.Second)) {
			t.Fatalf("drain deadline %s, want 10s after the release (%s)", d, released)
		}
	}

	f.step(Drained{From: hmP1})
	out = f.step(Drained{From: hmP2})
	wantSent(t, "drained", out)
	if len(out.Waits) != 1 || out.Waits[0].Kind != WaitSessions || f.m.Phase() != PhaseSessions {
		t.Fatalf("drained: waits %+v in %s, want the wait for sessions", out.Waits, f.m.Phase())
	}
	out = f.step(sessionsDone{})
	wantSent(t, "sessions", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs")
	f.each(down, hmP1, hmP2)
	out = f.step(Down{From: hmJobs})
	wantSent(t, "down", out, "MarkDrained→ownership")
	out = f.step(DrainMarked{})
	if !out.End || out.Err != nil || f.m.Phase() != PhaseDone || !out.Deadline.At.IsZero() {
		t.Fatalf("drain marked: end %v (%v) in %s, deadline %+v; want the end, no error, done, no deadline",
			out.End, out.Err, f.m.Phase(), out.Deadline)
	}
	if out = f.step(Handover{}); len(out.Moves) != 0 || out.End {
		t.Fatalf("a second Handover moved %v", out.Moves)
	}
}

// TestMachineFencingCascade: cascade 2. A fence stops every member and the jobs host at
// once, with no reply awaited; a renewal that succeeds serves again; a member that
// cannot serve is told Serve again after serveRetry while the lease is ours, and not
// once it is fenced.
func TestMachineFencingCascade(t *testing.T) {
	f := newHM(t, hcfg{}).serve()
	out := f.step(Fenced{})
	wantSent(t, "fenced", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs")
	if v := f.m.view(rootView{}); v.up || v.state != lease.StateFenced || !out.StopRetries || !out.Deadline.At.IsZero() {
		t.Fatalf("fenced: %+v, stop retries %v, deadline %+v", v, out.StopRetries, out.Deadline)
	}
	out = f.step(Serving{Revision: 9, Epoch: 3, Restored: true})
	wantSent(t, "restored", out, "Serve→primary/p1", "Serve→primary/p2", "Serve→jobs")
	f.each(accepted, hmP1, hmJobs)
	if f.m.view(rootView{}).up {
		t.Fatal("serving before every member confirmed")
	}

	f.now = f.now.Add(time.Second)
	broker := errors.New("broker away")
	out = f.step(ServeFailed{From: hmP2, Err: broker})
	if len(out.Retries) != 1 || out.Retries[0].To != hmP2 || !out.Retries[0].At.Equal(f.now.Add(serveRetry)) {
		t.Fatalf("serve failed: retries %+v, want p2 at +%s", out.Retries, serveRetry)
	}
	if l := f.m.view(rootView{}).failing; len(l) != 1 || l[0].Member != hmP2.ID || !l[0].Since.Equal(f.now) {
		t.Fatalf("failing %+v, want p2 since now", l)
	}
	f.now = f.now.Add(serveRetry)
	wantSent(t, "retry", f.step(retryServe{to: hmP2}), "Serve→primary/p2")
	out = f.step(ServeFailed{From: hmP2, Err: broker})
	if len(out.Logs) != 1 || out.Logs[0].Level.String() != "debug" {
		t.Fatalf("the same failure again logged %+v, want one debug line", out.Logs)
	}
	out = f.step(Fenced{})
	wantSent(t, "fenced again", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs")
	if len(f.m.view(rootView{}).failing) != 0 {
		t.Fatal("a fenced engine still lists failing members")
	}
	wantSent(t, "a retry after the fence", f.step(retryServe{to: hmP2}))

	// A store at our epoch refuses it: the ownership is told the store is ahead.
	f.step(Serving{Revision: 10, Epoch: 3, Restored: true})
	out = f.step(ServeFailed{From: hmP1, Err: &epoch.StaleError{Store: "kv", Current: 5}})
	wantSent(t, "store ahead", out, "StoreAhead→ownership")
	if out.Sends[0].Msg.(StoreAhead).Epoch != 5 {
		t.Fatalf("StoreAhead %+v, want epoch 5", out.Sends[0].Msg)
	}
	// A bump of our own while serving: every member adopts it.
	f.each(accepted, hmP1, hmP2, hmJobs)
	out = f.step(EpochChanged{Epoch: 6})
	wantSent(t, "epoch changed", out, "Serve→primary/p1", "Serve→primary/p2", "Serve→jobs")
}

// TestMachineLostCascade: a lost lease stops every member and the jobs host and ends the
// engine with a *lease.LostError; during a handover it stops them, and the handover
// goes on to its end, with no error. A claim that fails ends with its error.
func TestMachineLostCascade(t *testing.T) {
	thief := lease.Holder{InstanceID: "thief"}
	f := newHM(t, hcfg{}).serve()
	out := f.step(Lost{Holder: thief})
	wantSent(t, "lost", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs")
	var lost *lease.LostError
	if !out.End || !errors.As(out.Err, &lost) || lost.Holder != thief || f.m.view(rootView{}).state != lease.StateLost {
		t.Fatalf("lost: end %v, err %v", out.End, out.Err)
	}
	if out = f.step(ClaimFailed{Err: errors.New("late")}); out.End {
		t.Fatal("the engine ended twice")
	}

	f = newHM(t, hcfg{}).via(PhaseJobs)
	out = f.step(Lost{Holder: thief})
	wantSent(t, "lost in the jobs phase", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs")
	if out.End {
		t.Fatal("a lost lease ended a handover under way")
	}
	out = f.step(Drained{From: hmJobs})
	wantSent(t, "nothing to release", out, "StopAccepting→primary/p1", "StopAccepting→primary/p2")
	if f.m.Phase() != PhaseDrain {
		t.Fatalf("in %s, want the drain: nothing to release, no successor to wait for", f.m.Phase())
	}
	for f.m.Phase() != PhaseDone {
		out = f.deadline()
	}
	if !out.End || out.Err != nil {
		t.Fatalf("the handover ended %v with %v, want no error", out.End, out.Err)
	}

	f = newHM(t, hcfg{})
	f.step(StandingBy{Holder: thief})
	refused := &lease.StandbyTimeoutError{Holder: thief}
	if out = f.step(ClaimFailed{Err: refused}); !out.End || out.Err != refused {
		t.Fatalf("claim failed: end %v, err %v", out.End, out.Err)
	}
}

// TestMachineStepDownCascade: a step-down is cascade 1 towards a named standby (the
// ownership's HandTo target). The members stop accepting only once that standby
// answers at the broker: before its answer the root releases and waits, serving on;
// a roll call that found the standby does not end the wait. A jobs phase whose run has
// not returned holds the lease a lease period at a time, with one warning each.
func TestMachineStepDownCascade(t *testing.T) {
	f := newHM(t, hcfg{}).serve()
	f.step(Handover{})
	f.step(rollCallDone{any: true})
	f.now = f.now.Add(10 * time.Second) // the drain deadline: the jobs host cancelled its runs
	out := f.deadline()
	if f.m.Phase() != PhaseJobs || !logged(out, "handover: a job's run has not returned since it was cancelled at the drain deadline; the engine keeps the lease until it returns, so no other engine starts the job meanwhile") ||
		!out.Deadline.At.Equal(f.now.Add(hmLease)) || len(out.Sends) != 0 {
		t.Fatalf("jobs deadline: in %s, deadline %+v, sent %q; want the jobs phase held a lease period on", f.m.Phase(), out.Deadline, sent(out))
	}
	out = f.step(Drained{From: hmJobs})
	wantSent(t, "the run returned", out, "Release→ownership")
	out = f.step(Released{})
	wantSent(t, "released to the standby", out)
	if f.m.Phase() != PhaseSuccessor {
		t.Fatalf("in %s, want the successor phase", f.m.Phase())
	}
	if out = f.step(rollCallDone{any: true}); len(out.Moves) != 0 {
		t.Fatalf("a roll call that found a standby moved %v", out.Moves)
	}
	f.now = f.now.Add(50 * time.Millisecond)
	out = f.step(successorDone{holder: lease.Holder{InstanceID: "standby"}})
	wantSent(t, "the standby answers", out, "StopAccepting→primary/p1", "StopAccepting→primary/p2")
	if f.m.Phase() != PhaseDrain {
		t.Fatalf("in %s, want the drain", f.m.Phase())
	}
	// A successor that never answers: the wait ends at its bound, logged as such.
	g := newHM(t, hcfg{}).via(PhaseSuccessor)
	out = g.step(successorDone{holder: lease.Holder{InstanceID: "standby"}, err: context.DeadlineExceeded})
	if !logged(out, "handover: the new holder did not answer at the broker in time; stopping accepting") {
		t.Fatalf("logs %+v", out.Logs)
	}
}

// TestMachineFailPointsHoldMessagesBack: with release-before-jobs and
// serve-after-release the machine asks the driver to hold the jobs' and the members'
// StopAccepting back (a lease, lease/2), instead of sending them.
func TestMachineFailPointsHoldMessagesBack(t *testing.T) {
	f := newHM(t, hcfg{faults: handoverFaults{releaseBeforeJobs: true, serveAfterRelease: true}}).serve()
	out := f.step(Handover{})
	wantSent(t, "handover", out, "Release→ownership")
	f.step(Released{})
	out = f.step(successorDone{})
	wantSent(t, "successor", out)
	if len(out.Held) != 1 || len(out.Held[0].To) != 2 || !out.Held[0].At.Equal(f.now.Add(hmLease/2)) {
		t.Fatalf("held %+v, want the members' StopAccepting lease/2 later", out.Held)
	}
}

// TestMachineLostDuringTheReleaseMovesOn: the root knows the ownership only from its
// broadcasts, so a lease lost just before the handover began (its Lost still behind the
// Handover in the root's mailbox) or while the release runs reaches the release phase
// as a Lost, never as a Released: the ownership ignores a Release once the lease is
// gone. The cascade moves on at once, as it does when it finds the lease gone as the
// phase begins, instead of waiting out the phase's two renewal periods.
func TestMachineLostDuringTheReleaseMovesOn(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  hcfg
	}{{"a successor check", hcfg{}}, {"no successor check", hcfg{noSuccessor: true}}} {
		t.Run(c.name, func(t *testing.T) {
			f := newHM(t, c.cfg).via(PhaseRelease)
			out := f.step(Lost{Holder: lease.Holder{InstanceID: "thief"}})
			wantSent(t, "lost in the release", out, "Stop→primary/p1", "Stop→primary/p2", "Stop→jobs",
				"StopAccepting→primary/p1", "StopAccepting→primary/p2")
			if f.m.Phase() != PhaseDrain || out.End {
				t.Fatalf("in %s (end %v), want the drain: nothing to release any more, no successor to wait for", f.m.Phase(), out.End)
			}
		})
	}
}
