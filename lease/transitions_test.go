package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/fsmtable/fsmtabletest"
)

// The fixture's engines: me (rollout v2), peer (our rollout), old (another rollout).
var (
	fxMe    = holder("me", "v2")
	fxPeer  = holder("peer", "v2")
	fxPeer2 = holder("peer2", "v2")
	fxOld   = holder("old", "v1")
	fxOld2  = holder("old2", "v1")
	fxOther = holder("other", "v3")
)

// fx is a machine on a virtual clock, driven input by input.
type fx struct {
	t   *testing.T
	m   *Machine
	now time.Time
	rev uint64 // the last revision the fixture's store handed out
}

func (f *fx) start() Output   { return f.m.Start(f.now) }
func (f *fx) release() Output { return f.m.Release(f.now) }

func (f *fx) tickAt(at time.Time) Output {
	f.now = at
	return f.m.Tick(at)
}

func (f *fx) observe(rec Record) Output { return f.m.Observe(f.now, rec) }

func (f *fx) result(res Result) Output {
	f.t.Helper()
	op := f.m.InFlight()
	if op == nil {
		f.t.Fatalf("no call in flight in %s", f.m.SubState())
	}
	res.ID = op.ID
	return f.m.Done(f.now, res)
}

func (f *fx) next() uint64 {
	f.rev = max(f.rev, f.m.rev, f.m.seen.Revision) + 1
	return f.rev
}

func (f *fx) ok() Output                { return f.result(Result{Rev: f.next()}) }
func (f *fx) conflict() Output          { return f.result(Result{Err: ErrConflict}) }
func (f *fx) unknown() Output           { return f.result(Result{Err: errors.New("timeout")}) }
func (f *fx) read(rec Record) Output    { return f.result(Result{Record: rec}) }
func (f *fx) held(h Holder) Record      { return Record{Holder: h, Revision: f.next()} }
func (f *fx) ours() Record              { return f.held(fxMe) }
func (f *fx) seenAgain(h Holder) Record { return Record{Holder: h, Revision: f.m.seen.Revision + 1} }

// The epoch records of the fixture: none, and one of epoch n by h in state st at a
// revision of its own.
func (f *fx) readEpoch(rec EpochRecord) Output { return f.result(Result{Epoch: rec}) }
func (f *fx) epochOf(n uint64, h Holder, st EpochState) EpochRecord {
	return EpochRecord{Epoch: n, InstanceID: h.InstanceID, State: st, Revision: f.next()}
}
func (f *fx) observeEpoch(rec EpochRecord) Output { return f.m.ObserveEpoch(f.now, rec) }
func (f *fx) markDrained() Output                 { return f.m.MarkDrained(f.now) }

// deferred settles the epoch after the take by deferring to old's drain of epoch 4.
func (f *fx) deferred() { f.readEpoch(f.epochOf(4, fxOld, EpochDraining)) }

// releaseDeleting releases, and lets the draining mark of a release from serving land:
// the delete is in flight.
func releaseDeleting(f *fx) {
	f.release()
	if op := f.m.InFlight(); op != nil && op.Kind == OpWriteEpoch {
		f.ok()
	}
}

// paths drive a fresh machine to each sub-state, from the one before it.
func paths() map[SubState]func(f *fx) {
	return map[SubState]func(f *fx){
		unstarted:            func(f *fx) {},
		claimReading:         func(f *fx) { f.start() },
		claimRetryWait:       func(f *fx) { f.via(claimReading).unknown() },
		creating:             func(f *fx) { f.via(claimReading).read(Record{}) },
		claimWatching:        func(f *fx) { f.via(claimReading).read(f.held(fxPeer)) },
		watchReading:         func(f *fx) { f.via(claimWatching).tickAt(f.m.takeoverAt()) },
		watchRetryWait:       func(f *fx) { f.via(watchReading).unknown() },
		watchCreating:        func(f *fx) { f.via(claimWatching).observe(Record{}) },
		takingOver:           func(f *fx) { f.via(watchReading).read(f.m.seen) },
		standingBy:           func(f *fx) { f.via(claimReading).read(f.held(fxOld)) },
		standbyReading:       func(f *fx) { f.via(standingBy).tickAt(f.m.takeoverAt()) },
		standbyRetryWait:     func(f *fx) { f.via(standbyReading).unknown() },
		standbyCreating:      func(f *fx) { f.via(standingBy).observe(Record{}) },
		standbyTakingOver:    func(f *fx) { f.via(standbyReading).read(f.m.seen) },
		publishing:           func(f *fx) { f.via(creating).ok() },
		standbyPublishing:    func(f *fx) { f.via(standbyCreating).ok() },
		settlingEpoch:        func(f *fx) { f.via(publishing).ok() },
		standbySettlingEpoch: func(f *fx) { f.via(standbyPublishing).ok() },
		holding:              func(f *fx) { f.via(settlingEpoch).readEpoch(EpochRecord{}); f.ok() },
		advancingEpoch:       func(f *fx) { f.via(renewCreating).ok() },
		fencedSettlingEpoch:  func(f *fx) { f.via(fencedCreating).ok() },
		markingDrained:       func(f *fx) { f.via(holding).release(); f.ok(); f.ok(); f.markDrained() },
		renewing:             func(f *fx) { f.via(holding).tickAt(f.m.nextRenew) },
		renewReading:         func(f *fx) { f.via(renewing).conflict() },
		renewCreating:        func(f *fx) { f.via(renewReading).read(Record{}) },
		republishing: func(f *fx) {
			f.via(publishing).unknown() // the publish failed: publish again after a renewal
			f.readEpoch(EpochRecord{})
			f.ok()
			f.tickAt(f.m.nextRenew)
			f.ok()
		},
		fencedRenewing: func(f *fx) { f.via(holding).tickAt(f.m.fenceAt()) },
		fenced: func(f *fx) {
			f.via(fencedRenewing)
			f.now = f.now.Add(10 * time.Millisecond)
			f.unknown()
		},
		fencedReading:    func(f *fx) { f.via(fencedRenewing).conflict() },
		fencedCreating:   func(f *fx) { f.via(fencedReading).read(Record{}) },
		fencedPublishing: func(f *fx) { f.via(republishing).tickAt(f.m.fenceAt()) },
		evicted:          func(f *fx) { f.via(renewing).observe(f.held(fxOther)) },
		evictedReading:   func(f *fx) { f.via(holding).observe(f.held(fxOther)) },
		releasingClaim:   func(f *fx) { f.via(claimReading).release() },
		releasing:        func(f *fx) { f.via(holding).release() },
		fencedReleasing:  func(f *fx) { f.via(fenced).release() },
		evictedReleasing: func(f *fx) { f.via(evicted).release() },
		refused:          func(f *fx) { f.via(claimWatching).observe(f.seenAgain(fxPeer)) },
		released:         func(f *fx) { f.release() },
		lost:             func(f *fx) { f.via(renewReading).read(f.held(fxOther)) },
	}
}

// via drives f to s by its path and checks it got there.
func (f *fx) via(s SubState) *fx {
	f.t.Helper()
	paths()[s](f)
	if f.m.SubState() != s {
		f.t.Fatalf("the path to %s ended in %s", s, f.m.SubState())
	}
	return f
}

func reach(t *testing.T, s SubState) *fx {
	t.Helper()
	f := &fx{t: t, m: newMachine(t, Config{Me: fxMe, Lease: lease, StandbyTimeout: standby, Drain: drain}), now: t0}
	return f.via(s)
}

// scenario gives a row's input, once per case of its condition, each on a fresh machine
// in the row's sub-state.
type scenario func(t *testing.T, from SubState) []Output

// each runs input on a fresh machine in from, once per input.
func each(inputs ...func(f *fx) Output) scenario {
	return func(t *testing.T, from SubState) []Output {
		var outs []Output
		for _, in := range inputs {
			outs = append(outs, in(reach(t, from)))
		}
		return outs
	}
}

// after runs input on a fresh machine driven to s, then through prep (which ends in the
// row's sub-state).
func after(s SubState, prep func(f *fx), inputs ...func(f *fx) Output) scenario {
	return func(t *testing.T, _ SubState) []Output {
		var outs []Output
		for _, in := range inputs {
			f := reach(t, s)
			prep(f)
			outs = append(outs, in(f))
		}
		return outs
	}
}

func thenRelease(f *fx) { f.release() }

func evictedBy(f *fx) { f.observe(f.held(fxOther)) }

func evictedReleaseOf(f *fx) { evictedBy(f); f.release() }

var (
	ok        = (*fx).ok
	conflict  = (*fx).conflict
	unknown   = (*fx).unknown
	free      = func(f *fx) Output { return f.read(Record{}) }
	readOurs  = func(f *fx) Output { return f.read(f.ours()) }
	readBy    = func(h Holder) func(f *fx) Output { return func(f *fx) Output { return f.read(f.held(h)) } }
	seenBy    = func(h Holder) func(f *fx) Output { return func(f *fx) Output { return f.read(f.seenAgain(h)) } }
	obsBy     = func(h Holder) func(f *fx) Output { return func(f *fx) Output { return f.observe(f.seenAgain(h)) } }
	late      = func(f *fx) Output { f.now = f.m.sentAt.Add(fence); return f.ok() }
	inTime    = func(f *fx) Output { f.now = f.now.Add(10 * time.Millisecond); return f.ok() }
	toPublish = func(in func(f *fx) Output) func(f *fx) Output {
		return func(f *fx) Output { f.m.unpublished = true; return in(f) }
	}
	noRoom = func(f *fx) Output { f.now = f.m.nextRenew.Add(-renew / 8); return f.ok() }
	// the delete of a release, then the read after its conflict
	deleting = func(f *fx) { f.read(f.ours()) }
)

// byCondition are the scenarios of the conditions that mean the same in every row.
var byCondition = map[string]scenario{
	"Start":                               each((*fx).start),
	"Release":                             each((*fx).release),
	"Done read: free":                     each(free),
	"Done read: ours":                     each(readOurs),
	"Done read: unknown":                  each(unknown),
	"Done read: another holder":           each(readBy(fxOther)),
	"Done read: another rollout holds it": each(readBy(fxOld)),
	"Done read: our rollout holds it, or we have none": each(readBy(fxPeer)),
	"Done read: the revision watched, silent":          each(func(f *fx) Output { return f.read(f.m.seen) }),
	"Done read: the revision watched, not yet silent": each(func(f *fx) Output {
		rec := f.m.seen
		rec.Period = Period{InstanceID: rec.Holder.InstanceID, Lease: 10 * lease}
		return f.read(rec)
	}),
	"Done read: the holder watched renewed":                     each(func(f *fx) Output { return f.read(f.seenAgain(f.m.seen.Holder)) }),
	"Done read: another holder, another rollout":                each(seenBy(fxOld2)),
	"Done read: another holder, of our rollout or we have none": each(seenBy(fxPeer2)),
	"Done read: an engine of our rollout":                       each(seenBy(fxPeer)),
	"Done read: another revision or holder":                     each(seenBy(fxOld), seenBy(fxOther)),
	"Done create: ok":                                           each(ok),
	"Done create: conflict or unknown":                          each(conflict, unknown),
	"Done update: ok":                                           each(ok),
	"Done update: conflict or unknown":                          each(conflict, unknown),
	"Done update: conflict":                                     each(conflict),
	"Done update: unknown":                                      each(unknown),
	"Done create: conflict":                                     each(conflict),
	"Done create: unknown":                                      each(unknown),
	"Done publish: any outcome":                                 each(ok, unknown),
	"Done update: ok, our period to publish":                    each(toPublish(ok)),
	"Done create: ok (settle the epoch)":                        each(ok, noRoom),
	"Done update: ok in time":                                   each(inTime),
	"Done update: ok in time, our period to publish":            each(toPublish(inTime)),
	"Done update: ok too late":                                  each(late),
	"Done create: ok in time (settle the epoch)":                each(ok, noRoom),
	"Done create: ok too late":                                  each(late),
	"Deadline retry due":                                        each(func(f *fx) Output { return f.tickAt(f.m.retryAt) }),
	"Deadline takeover due":                                     each(func(f *fx) Output { return f.tickAt(f.m.takeoverAt()) }),
	"Deadline renewal due":                                      each(func(f *fx) Output { return f.tickAt(f.m.nextRenew) }),
	"Deadline fence due":                                        each(func(f *fx) Output { return f.tickAt(f.m.fenceAt()) }),
	"Deadline standby timeout": each(func(f *fx) Output {
		f.m.seenLease = time.Hour // no takeover before it
		f.m.retryAt = f.m.standbyUntil.Add(time.Second)
		return f.tickAt(f.m.standbyUntil)
	}),
	"Observe free":                                           each(func(f *fx) Output { return f.observe(Record{}) }),
	"Observe ours":                                           each(func(f *fx) Output { return f.observe(f.ours()) }),
	"Observe the holder watched renewed":                     each(func(f *fx) Output { return f.observe(f.seenAgain(f.m.seen.Holder)) }),
	"Observe another holder, another rollout":                each(obsBy(fxOld2)),
	"Observe another holder, of our rollout or we have none": each(obsBy(fxPeer2)),
	"Observe an engine of our rollout":                       each(obsBy(fxPeer)),
	"Observe another revision or holder":                     each(obsBy(fxOld), obsBy(fxOther)),
	"Observe a write not ours": each(
		func(f *fx) Output { return f.observe(f.held(fxOther)) },
		func(f *fx) Output { return f.observe(f.held(Holder{})) },
		func(f *fx) Output { return f.observe(Record{Freed: f.next()}) },
		func(f *fx) Output { return f.observe(Record{}) }, // the key gone without a marker
	),
}

// byRow are the scenarios of rows whose condition needs a call of its own in flight.
func byRow() map[transition]scenario {
	key := func(from SubState, in Input, when string, to SubState) transition {
		return transition{From: from, In: in, When: when, To: to}
	}
	releaseOf := func(s SubState, inputs ...func(f *fx) Output) scenario { return after(s, thenRelease, inputs...) }
	delConflict := func(f *fx) Output { return f.conflict() }
	// the read after a release's delete conflicted
	releaseRead := func(prep func(f *fx)) func(f *fx) {
		return func(f *fx) { f.release(); prep(f); f.conflict() }
	}
	rows := map[transition]scenario{
		// evicted: the call sent before the eviction decides what the read after it is for
		key(evicted, InputDone, "update or create: ok (counted, no restore)", evictedReading): func(t *testing.T, _ SubState) []Output {
			return append(after(renewing, evictedBy, ok)(t, 0), after(renewCreating, evictedBy, ok)(t, 0)...)
		},
		key(evicted, InputDone, "any call: unknown", evictedReading): func(t *testing.T, _ SubState) []Output {
			var outs []Output
			for _, s := range []SubState{renewing, renewReading, renewCreating} {
				outs = append(outs, after(s, evictedBy, unknown)(t, 0)...)
			}
			return outs
		},
		key(evicted, InputDone, "publish: any outcome", evictedReading): after(republishing, evictedBy, ok, unknown),
		key(evicted, InputDone, "read: free (create it)", evicted):      after(renewReading, evictedBy, free),
		key(evicted, InputDone, "read: ours (renew at it)", evicted):    after(renewReading, evictedBy, readOurs),
		key(evicted, InputDone, "read: another holder", lost):           after(renewReading, evictedBy, readBy(fxOther)),
		key(evicted, InputDone, "create: conflict", lost):               after(renewCreating, evictedBy, conflict),

		// evicted-releasing: the call sent before the eviction, then the release
		key(evictedReleasing, InputDone, "renewal: ok (no restore; delete)", fencedReleasing): func(t *testing.T, _ SubState) []Output {
			return append(after(renewing, evictedReleaseOf, inTime)(t, 0), after(renewCreating, evictedReleaseOf, inTime)(t, 0)...)
		},
		key(evictedReleasing, InputDone, "renewal: update conflict (read)", fencedReleasing): after(renewing, evictedReleaseOf, conflict),
		key(evictedReleasing, InputDone, "renewal: unknown (delete)", fencedReleasing): func(t *testing.T, _ SubState) []Output {
			var outs []Output
			for _, s := range []SubState{renewing, renewReading, renewCreating} {
				outs = append(outs, after(s, evictedReleaseOf, unknown)(t, 0)...)
			}
			return outs
		},
		key(evictedReleasing, InputDone, "renewal read: ours (delete at it)", fencedReleasing): after(renewReading, evictedReleaseOf, readOurs),
		key(evictedReleasing, InputDone, "renewal read: free", released):                       after(renewReading, evictedReleaseOf, free),
		key(evictedReleasing, InputDone, "renewal: another holder", lost): func(t *testing.T, _ SubState) []Output {
			return append(after(renewReading, evictedReleaseOf, readBy(fxOther))(t, 0), after(renewCreating, evictedReleaseOf, conflict)(t, 0)...)
		},
		key(evictedReleasing, InputDone, "publish: any outcome (delete)", fencedReleasing): after(republishing, evictedReleaseOf, ok, unknown),

		key(releasingClaim, InputDone, "claim read: ours (delete it)", releasingClaim): releaseOf(claimReading, readOurs),
		key(releasingClaim, InputDone, "claim read: not ours, or unknown", released):   releaseOf(claimReading, free, readBy(fxOld), unknown),
		key(releasingClaim, InputDone, "create or update: ok (delete it)", releasingClaim): func(t *testing.T, _ SubState) []Output {
			return append(releaseOf(creating, ok)(t, 0), releaseOf(takingOver, ok)(t, 0)...)
		},
		key(releasingClaim, InputDone, "create or update: conflict or unknown", released): func(t *testing.T, _ SubState) []Output {
			return append(releaseOf(creating, conflict, unknown)(t, 0), releaseOf(takingOver, conflict, unknown)(t, 0)...)
		},
		key(releasingClaim, InputDone, "publish: any outcome (delete)", releasingClaim): releaseOf(publishing, ok, unknown),
		key(releasingClaim, InputDone, "delete: ok or unknown", released):               after(claimReading, func(f *fx) { f.release(); deleting(f) }, ok, unknown),
		key(releasingClaim, InputDone, "delete: conflict (read)", releasingClaim):       after(claimReading, func(f *fx) { f.release(); deleting(f) }, delConflict),
		key(releasingClaim, InputDone, "release read: ours, < 3 deletes (delete)", releasingClaim): after(claimReading,
			releaseRead(deleting), readOurs),
		key(releasingClaim, InputDone, "release read: other, or unknown", released): after(claimReading,
			releaseRead(deleting), free, readBy(fxOther), unknown),
	}
	for _, s := range []SubState{releasing, fencedReleasing} {
		held, reading, creatingIt, publishingIt, resting := renewing, renewReading, renewCreating, republishing, holding
		if s == fencedReleasing {
			held, reading, creatingIt, publishingIt, resting = fencedRenewing, fencedReading, fencedCreating, fencedPublishing, fenced
		}
		if s == releasing {
			rows[key(s, InputDone, "renewal: ok (delete)", s)] = func(t *testing.T, _ SubState) []Output {
				return append(releaseOf(held, ok)(t, 0), releaseOf(creatingIt, ok)(t, 0)...)
			}
		} else {
			rows[key(s, InputDone, "renewal: ok in time (delete)", releasing)] = releaseOf(held, inTime)
			rows[key(s, InputDone, "renewal: ok too late (delete)", s)] = releaseOf(held, late)
		}
		rows[key(s, InputDone, "renewal: update conflict (read)", s)] = releaseOf(held, conflict)
		rows[key(s, InputDone, "renewal: unknown (delete)", s)] = func(t *testing.T, _ SubState) []Output {
			var outs []Output
			for _, c := range []SubState{held, reading, creatingIt} {
				outs = append(outs, releaseOf(c, unknown)(t, 0)...)
			}
			return outs
		}
		rows[key(s, InputDone, "renewal read: ours (delete at it)", s)] = releaseOf(reading, readOurs)
		rows[key(s, InputDone, "renewal read: free", released)] = releaseOf(reading, free)
		rows[key(s, InputDone, "renewal: another holder", lost)] = func(t *testing.T, _ SubState) []Output {
			return append(releaseOf(reading, readBy(fxOther))(t, 0), releaseOf(creatingIt, conflict)(t, 0)...)
		}
		rows[key(s, InputDone, "publish: any outcome (delete)", s)] = releaseOf(publishingIt, ok, unknown)
		rows[key(s, InputDone, "delete: ok or unknown", released)] = after(resting, releaseDeleting, ok, unknown)
		rows[key(s, InputDone, "delete: conflict (read)", s)] = after(resting, releaseDeleting, delConflict)
		rows[key(s, InputDone, "release read: ours, < 3 deletes (delete)", s)] = after(resting,
			func(f *fx) { releaseDeleting(f); f.conflict() }, readOurs)
		rows[key(s, InputDone, "release read: other, or unknown", released)] = func(t *testing.T, _ SubState) []Output {
			outs := after(resting, func(f *fx) { releaseDeleting(f); f.conflict() }, free, readBy(fxOther), unknown)(t, 0)
			// and the third delete that conflicts: the record is ours, but no more deletes
			return append(outs, after(resting, func(f *fx) {
				releaseDeleting(f)
				f.conflict()
				f.read(f.ours())
				f.conflict()
				f.read(f.ours())
				f.conflict()
			}, readOurs)(t, 0)...)
		}
	}
	epochRows(rows)
	handoffRows(rows)
	return rows
}

// TestTransitionTable drives every row of the table: each case of its condition, from
// its sub-state, makes the move it lists.
func TestTransitionTable(t *testing.T) {
	rows := byRow()
	for _, row := range transitions {
		name := row.From.String() + " " + row.In.String() + " " + row.When
		t.Run(name, func(t *testing.T) {
			sc, ok := rows[row]
			if !ok {
				sc = byCondition[strings.TrimSpace(row.In.String()+" "+row.When)]
			}
			if sc == nil {
				t.Fatal("no scenario for this row")
			}
			for i, out := range sc(t, row.From) {
				var got *Move
				for _, mv := range out.Moves {
					if mv.Input == row.In {
						got = &mv
						break
					}
				}
				want := Move{From: row.From, To: row.To, Input: row.In}
				if got == nil || *got != want {
					t.Errorf("case %d: moves %v, want %v first on %s", i, out.Moves, want, row.In)
				}
			}
		})
	}
}

// TestIllegalTransitionIsReported: a move the table does not list, or a sub-state in a
// shape its row forbids, is reported (an event carrying a *TransitionError) and counted.
func TestIllegalTransitionIsReported(t *testing.T) {
	m, err := NewMachine(Config{Me: fxMe, Lease: lease, StandbyTimeout: standby})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(t0)
	out := m.step(InputObserve, t0, func(out *Output) { m.to(out, holding) })
	var te *TransitionError
	if len(out.Events) == 0 || out.Events[0].Kind != EventIllegalTransition || !errors.As(out.Events[0].Err, &te) ||
		!errors.Is(te, ErrIllegalTransition) || te.From != claimReading || te.To != holding || te.Input != InputObserve {
		t.Fatalf("events %+v, want an illegal transition from claim-reading to holding on Observe", out.Events)
	}
	if n, last := m.Illegal(); n == 0 || !errors.Is(last, ErrIllegalTransition) {
		t.Fatalf("Illegal() = %d, %v", n, last)
	}
	if !strings.Contains(te.Error(), "claim-reading to holding on Observe") {
		t.Fatalf("message %q", te)
	}
	// holding with a call in flight (the claim's read) breaks the row's shape too.
	if n, _ := m.Illegal(); n < 2 {
		t.Fatalf("Illegal() = %d, want the move and the call in flight", n)
	}
}

// TestTableIsDocumented keeps the table in Machine's doc comment the one the machine
// consults.
func TestTableIsDocumented(t *testing.T) {
	fsmtabletest.CheckDoc(t, "machine.go", "Machine", transitionTable)
}

// TestEverySubStateIsReachedAndNamed: every sub-state has a path in the fixture, a name,
// and appears in the table.
func TestEverySubStateIsReachedAndNamed(t *testing.T) {
	for s := unstarted; s < numSubStates; s++ {
		if s.attrs().name == "" || paths()[s] == nil || !transitionTable.Has(s) {
			t.Errorf("%s: name %q, path %v, in the table %v", s, s.attrs().name, paths()[s] != nil, transitionTable.Has(s))
		}
	}
}
