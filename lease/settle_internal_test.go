package lease

import "testing"

// epochRows are the scenarios of the epoch's rows (settle.go): the settle after a take,
// the deferred bump, and the release's marks.
func epochRows(rows map[transition]scenario) {
	key := func(from SubState, in Input, when string, to SubState) transition {
		return transition{From: from, In: in, When: when, To: to}
	}
	none := func(f *fx) Output { return f.readEpoch(EpochRecord{}) }
	readNone := func(f *fx) { none(f) }
	recBy := func(n uint64, h Holder, st EpochState) func(f *fx) Output {
		return func(f *fx) Output { return f.readEpoch(f.epochOf(n, h, st)) }
	}
	conflicts := func(n int) func(f *fx) {
		return func(f *fx) {
			for range n {
				readNone(f)
				f.conflict()
			}
		}
	}
	then := func(preps ...func(f *fx)) func(f *fx) {
		return func(f *fx) {
			for _, p := range preps {
				p(f)
			}
		}
	}
	join := func(scs ...scenario) scenario {
		return func(t *testing.T, from SubState) []Output {
			var outs []Output
			for _, sc := range scs {
				outs = append(outs, sc(t, from)...)
			}
			return outs
		}
	}

	// The four sub-states that settle the epoch share their rows but the failure's.
	for _, s := range []SubState{settlingEpoch, standbySettlingEpoch, advancingEpoch, fencedSettlingEpoch} {
		rows[key(s, InputDone, "epoch read: bump it (write the next)", s)] = each(none,
			recBy(3, fxOther, EpochServing), recBy(3, fxOld, EpochDrained), recBy(3, fxMe, EpochServing))
		rows[key(s, InputDone, "epoch read: another engine drains it (defer)", holding)] = each(recBy(3, fxOld, EpochDraining))
		rows[key(s, InputDone, "epoch write: ok", holding)] = after(s, readNone, ok)
		rows[key(s, InputDone, "epoch write: conflict, < 2 writes (read)", s)] = after(s, readNone, conflict)
		late := func(f *fx) Output { f.now = f.m.fenceAt(); return none(f) }
		failure := join(each(unknown, late), after(s, readNone, unknown), after(s, then(conflicts(1), readNone), conflict))
		if s == advancingEpoch {
			rows[key(s, InputDone, "epoch call: unknown, a second conflict, or the fence passed (later)", holding)] = failure
		} else {
			rows[key(s, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced)] = failure
		}
	}
	// A write of ours whose reply was lost is found by the next settle's read.
	landed := func(f *fx) Output { return f.readEpoch(f.epochOf(f.m.tried, fxMe, EpochServing)) }
	rows[key(advancingEpoch, InputDone, "epoch read: our write landed", holding)] = after(advancingEpoch,
		func(f *fx) { readNone(f); f.unknown(); f.tickAt(f.m.bumpAt) }, landed)
	rows[key(fencedSettlingEpoch, InputDone, "epoch read: our write landed", holding)] = after(fencedSettlingEpoch,
		func(f *fx) { readNone(f); f.unknown(); f.tickAt(f.m.nextRenew); inTime(f) }, landed)
	rows[key(fencedRenewing, InputDone, "update: ok in time, the epoch to settle", fencedSettlingEpoch)] = after(settlingEpoch,
		func(f *fx) { readNone(f); f.unknown(); f.tickAt(f.m.nextRenew) }, inTime)
	rows[key(fencedReleasing, InputDone, "renewal: ok in time, the epoch to settle (delete)", fencedReleasing)] = after(settlingEpoch,
		func(f *fx) { readNone(f); f.unknown(); f.tickAt(f.m.nextRenew); f.release() }, inTime)

	// The deferred bump: the record turns drained, or our drain time passes; and a
	// settle that failed while serving, tried again.
	rows[key(holding, InputDeadline, "epoch due", advancingEpoch)] = join(
		after(settlingEpoch, (*fx).deferred, func(f *fx) Output {
			return f.observeEpoch(EpochRecord{Epoch: 4, InstanceID: fxOld.InstanceID, State: EpochDrained, Revision: f.next()})
		}),
		after(settlingEpoch, (*fx).deferred, untilEpochDue),
		after(advancingEpoch, func(f *fx) { f.unknown() }, func(f *fx) Output { return f.tickAt(f.m.bumpAt) }))

	rows[key(evicted, InputDone, "epoch call: any outcome", evictedReading)] = join(
		after(advancingEpoch, evictedBy, none, unknown),
		after(advancingEpoch, then(readNone, evictedBy), ok, conflict, unknown))
	rows[key(releasingClaim, InputDone, "epoch call: any outcome (delete)", releasingClaim)] = join(
		after(settlingEpoch, thenRelease, none, unknown),
		after(settlingEpoch, then(readNone, thenRelease), ok, conflict, unknown))

	// The release from serving marks the record draining before its delete.
	deferredAdvancing := then((*fx).deferred, func(f *fx) {
		f.observeEpoch(EpochRecord{Epoch: 4, InstanceID: fxOld.InstanceID, State: EpochDrained, Revision: f.next()})
	})
	rows[key(releasing, InputDone, "epoch settle: any outcome (mark draining, or delete)", releasing)] = join(
		after(advancingEpoch, thenRelease, none, unknown),
		after(settlingEpoch, then(deferredAdvancing, thenRelease), none, unknown))
	rows[key(releasing, InputDone, "mark draining: ok or unknown (delete)", releasing)] = after(holding, thenRelease, ok, unknown)
	rows[key(releasing, InputDone, "mark draining: conflict (read)", releasing)] = after(holding, thenRelease, conflict)
	markConflict := func(f *fx) { f.release(); f.conflict() }
	rows[key(releasing, InputDone, "draining read: our epoch, < 2 marks (mark again)", releasing)] = after(holding,
		markConflict, recBy(1, fxMe, EpochServing), recBy(1, fxOld, EpochDrained))
	rows[key(releasing, InputDone, "draining read: moved on, or unknown (delete)", releasing)] = join(
		after(holding, markConflict, recBy(2, fxOther, EpochServing), unknown),
		after(holding, then(markConflict, func(f *fx) { recBy(1, fxMe, EpochServing)(f) }, func(f *fx) { f.conflict() }),
			recBy(1, fxMe, EpochServing)))
	rows[key(fencedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing)] = join(
		after(holding, func(f *fx) { f.release(); f.tickAt(f.m.fenceAt()) }, ok, conflict, unknown),
		after(fencedSettlingEpoch, thenRelease, none, unknown))
	rows[key(evictedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing)] = after(advancingEpoch,
		evictedReleaseOf, none, unknown)

	// After it, the record marked drained once the root says the drain is over.
	rows[key(released, InputMarkDrained, "the record marked draining", markingDrained)] = after(holding,
		func(f *fx) { f.release(); f.ok(); f.ok() }, (*fx).markDrained)
	rows[key(markingDrained, InputDone, "mark drained: ok or unknown", released)] = each(ok, unknown)
	rows[key(markingDrained, InputDone, "mark drained: conflict (read)", markingDrained)] = each(conflict)
	rows[key(markingDrained, InputDone, "drained read: still ours, < 2 marks (mark again)", markingDrained)] = after(
		markingDrained, func(f *fx) { f.conflict() }, recBy(1, fxMe, EpochDraining))
	rows[key(markingDrained, InputDone, "drained read: moved on, or unknown", released)] = join(
		after(markingDrained, func(f *fx) { f.conflict() }, recBy(2, fxOther, EpochServing), recBy(1, fxOld, EpochDraining), unknown),
		after(markingDrained, func(f *fx) { f.conflict(); recBy(1, fxMe, EpochDraining)(f); f.conflict() },
			recBy(1, fxMe, EpochDraining)))
}

// untilEpochDue renews, each renewal a success, until the deferred bump's own time,
// and returns the step of that time.
func untilEpochDue(f *fx) Output {
	for {
		at := f.m.bumpAt
		if f.m.nextRenew.Before(at) {
			f.tickAt(f.m.nextRenew)
			f.ok()
			continue
		}
		return f.tickAt(at)
	}
}

// A floor learnt while the lease is not ours is kept for the next take's settle.
func TestStoreAheadFloorsTheNextBump(t *testing.T) {
	f := &fx{t: t, m: newMachine(t, Config{Me: fxMe, Lease: lease, StandbyTimeout: standby, Drain: drain}), now: t0}
	f.via(settlingEpoch)
	f.m.StoreAhead(f.now, 9)
	out := f.readEpoch(EpochRecord{})
	if out.Op == nil || out.Op.Kind != OpWriteEpoch || out.Op.Epoch.Epoch != 10 {
		t.Fatalf("the settle after a floor of 9 runs %+v, want a write of epoch 10", out.Op)
	}
}
