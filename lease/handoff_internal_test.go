package lease

import "testing"

// reachHot is reach with a hot standby: an engine of the holder's own rollout stands
// by instead of refusing.
func reachHot(t *testing.T, s SubState) *fx {
	t.Helper()
	f := &fx{t: t, m: newMachine(t, Config{Me: fxMe, Lease: lease, StandbyTimeout: standby, Drain: drain, Hot: true}), now: t0}
	return f.via(s)
}

// handoffRows are the table's scenarios for the directed handover and the hot standby.
func handoffRows(rows map[transition]scenario) {
	key := func(from SubState, in Input, when string, to SubState) transition {
		return transition{From: from, In: in, When: when, To: to}
	}
	formFor := func(tg Target) func(f *fx) Record {
		return func(f *fx) Record {
			h := f.m.seen.Holder
			if !h.Known() {
				h = fxOld
			}
			return Record{Holder: h.ReleasedTo(tg), Revision: f.next()}
		}
	}
	toUs := []func(f *fx) Record{formFor(Target{RolloutID: "v2"}), formFor(Target{InstanceID: fxMe.InstanceID, RolloutID: "v2"})}
	toOther := []func(f *fx) Record{formFor(Target{RolloutID: "v3"}), formFor(Target{InstanceID: fxOther.InstanceID})}
	reads := func(recs []func(f *fx) Record) []func(f *fx) Output {
		var ins []func(f *fx) Output
		for _, r := range recs {
			ins = append(ins, func(f *fx) Output { return f.read(r(f)) })
		}
		return ins
	}
	observes := func(recs []func(f *fx) Record) []func(f *fx) Output {
		var ins []func(f *fx) Output
		for _, r := range recs {
			ins = append(ins, func(f *fx) Output { return f.observe(r(f)) })
		}
		return ins
	}
	for _, s := range []SubState{claimReading, watchReading, standbyReading} {
		to, other := takingOver, claimWatching
		if s == standbyReading {
			to, other = standbyTakingOver, standingBy
		}
		rows[key(s, InputDone, "read: released to us (take it at once)", to)] = each(reads(toUs)...)
		if s != claimReading {
			rows[key(s, InputDone, "read: released to another (silent from here)", other)] = each(reads(toOther)...)
		}
	}
	for _, s := range []SubState{claimWatching, watchRetryWait, standingBy, standbyRetryWait} {
		to, other := takingOver, claimWatching
		if s == standingBy || s == standbyRetryWait {
			to, other = standbyTakingOver, standingBy
		}
		rows[key(s, InputObserve, "released to us (take it at once)", to)] = each(observes(toUs)...)
		rows[key(s, InputObserve, "released to another (silent from here)", other)] = each(observes(toOther)...)
	}
	hot := func(in func(f *fx) Output) scenario {
		return func(t *testing.T, from SubState) []Output { return []Output{in(reachHot(t, from))} }
	}
	rows[key(claimReading, InputDone, "read: our rollout holds it, hot (stand by)", standingBy)] = hot(readBy(fxPeer))
	rows[key(standingBy, InputObserve, "an engine of our rollout, hot (wait on)", standingBy)] = hot(obsBy(fxPeer))
	rows[key(standbyRetryWait, InputObserve, "an engine of our rollout, hot (wait on)", standingBy)] = hot(obsBy(fxPeer))
	rows[key(standbyReading, InputDone, "read: an engine of our rollout, hot (wait on)", standingBy)] = hot(seenBy(fxPeer))

	handing := func(f *fx) {
		f.m.HandTo(Target{RolloutID: "v3"})
		releaseDeleting(f)
		if op := f.m.InFlight(); op == nil || op.Kind != OpUpdate || op.Purpose != PurposeRelease {
			f.t.Fatalf("in flight %v, want the hand-off write", op)
		}
	}
	rows[key(releasing, InputDone, "hand-off write: ok or unknown", released)] = after(holding, handing, ok, unknown)
	rows[key(releasing, InputDone, "hand-off write: conflict (read)", releasing)] = after(holding, handing, conflict)
}

// TestFencedHolderDeletesEvenWithATarget: a holder not surely serving names nobody.
func TestFencedHolderDeletesEvenWithATarget(t *testing.T) {
	f := reach(t, fenced)
	f.m.HandTo(Target{RolloutID: "v3"})
	out := f.release()
	if out.Op == nil || out.Op.Kind != OpDelete {
		t.Fatalf("op %v, want a delete", out.Op)
	}
}
