package lease

import "fmt"

// SubState is where a Machine stands, finer than State: what it waits for (a store
// call and its purpose, a deadline, a watch record) and whose lease it judges. State is
// derived from it. The values and every move between them are in the table above
// Machine; the zero value is not a sub-state.
type SubState uint8

const (
	unstarted SubState = iota + 1

	// Claiming, no holder watched yet.
	claimReading
	claimRetryWait
	creating

	// Claiming, watching a holder of our rollout (or of none) for one silent lease.
	claimWatching
	watchReading
	watchRetryWait
	watchCreating
	takingOver

	// Standing by: another rollout holds the lease.
	standingBy
	standbyReading
	standbyRetryWait
	standbyCreating
	standbyTakingOver

	// The lease is ours; our lease period is published, then the epoch settled, before
	// we serve.
	publishing
	standbyPublishing
	settlingEpoch
	standbySettlingEpoch

	// Serving.
	holding
	renewing
	renewReading
	renewCreating
	republishing
	advancingEpoch

	// Fenced: the lease may be ours, we serve nothing.
	fenced
	fencedRenewing
	fencedReading
	fencedCreating
	fencedPublishing
	fencedSettlingEpoch
	evicted
	evictedReading

	// Releasing.
	releasingClaim
	releasing
	fencedReleasing
	evictedReleasing
	markingDrained // released; the epoch record is marked drained

	// Terminal.
	refused
	released
	lost

	numSubStates = iota + 1
)

// callKinds is a set of OpKinds: the calls a sub-state may have in flight.
type callKinds uint8

func calls(kinds ...OpKind) callKinds {
	var c callKinds
	for _, k := range kinds {
		c |= 1 << k
	}
	return c
}

func (c callKinds) has(k OpKind) bool { return c&(1<<k) != 0 }

var (
	anyCall    = calls(OpRead, OpCreate, OpUpdate, OpDelete, OpPublish, OpReadEpoch, OpWriteEpoch)
	epochCalls = calls(OpReadEpoch, OpWriteEpoch)
)

// attrs are what a sub-state implies; the machine derives State, the watch, the calls
// it may have in flight and the deadlines it keeps from them.
type attrs struct {
	name  string
	state State
	watch bool      // the driver watches the lease and reports it with Observe
	calls callKinds // what may be in flight; 0: nothing
	// The deadlines kept besides the fence (kept while serving): the renewal, the
	// takeover of a silent holder, the standby timeout, the retry of a failed read.
	renews, takeover, standbyTimeout, retries bool
}

var subStates = [numSubStates]attrs{
	unstarted: {name: "unstarted", state: StateIdle},

	claimReading:   {name: "claim-reading", state: StateIdle, calls: calls(OpRead)},
	claimRetryWait: {name: "claim-retry-wait", state: StateIdle, retries: true},
	creating:       {name: "creating", state: StateIdle, calls: calls(OpCreate)},

	claimWatching:  {name: "claim-watching", state: StateIdle, watch: true, takeover: true},
	watchReading:   {name: "watch-reading", state: StateIdle, watch: true, takeover: true, calls: calls(OpRead)},
	watchRetryWait: {name: "watch-retry-wait", state: StateIdle, watch: true, retries: true},
	watchCreating:  {name: "watch-creating", state: StateIdle, watch: true, takeover: true, calls: calls(OpCreate)},
	takingOver:     {name: "taking-over", state: StateIdle, watch: true, takeover: true, calls: calls(OpUpdate)},

	standingBy:        {name: "standby", state: StateStandby, standbyTimeout: true, watch: true, takeover: true},
	standbyReading:    {name: "standby-reading", state: StateStandby, standbyTimeout: true, watch: true, takeover: true, calls: calls(OpRead)},
	standbyRetryWait:  {name: "standby-retry-wait", state: StateStandby, standbyTimeout: true, watch: true, retries: true},
	standbyCreating:   {name: "standby-creating", state: StateStandby, standbyTimeout: true, watch: true, takeover: true, calls: calls(OpCreate)},
	standbyTakingOver: {name: "standby-taking-over", state: StateStandby, standbyTimeout: true, watch: true, takeover: true, calls: calls(OpUpdate)},

	publishing:        {name: "publishing-period", state: StateIdle, watch: true, renews: true, calls: calls(OpPublish)},
	standbyPublishing: {name: "standby-publishing-period", state: StateStandby, watch: true, renews: true, calls: calls(OpPublish)},
	settlingEpoch:     {name: "settling-epoch", state: StateIdle, watch: true, renews: true, calls: epochCalls},
	standbySettlingEpoch: {name: "standby-settling-epoch", state: StateStandby, watch: true, renews: true,
		calls: epochCalls},

	holding:      {name: "holding", state: StateServing, watch: true, renews: true},
	renewing:     {name: "renewing", state: StateServing, watch: true, renews: true, calls: calls(OpUpdate)},
	renewReading: {name: "renew-reading", state: StateServing, watch: true, renews: true, calls: calls(OpRead)},
	renewCreating: {name: "renew-creating", state: StateServing, watch: true, renews: true,
		calls: calls(OpCreate)},
	republishing:   {name: "republishing-period", state: StateServing, watch: true, renews: true, calls: calls(OpPublish)},
	advancingEpoch: {name: "advancing-epoch", state: StateServing, watch: true, renews: true, calls: epochCalls},

	fenced:           {name: "fenced", state: StateFenced, watch: true, renews: true},
	fencedRenewing:   {name: "fenced-renewing", state: StateFenced, watch: true, renews: true, calls: calls(OpUpdate)},
	fencedReading:    {name: "fenced-renew-reading", state: StateFenced, watch: true, renews: true, calls: calls(OpRead)},
	fencedCreating:   {name: "fenced-renew-creating", state: StateFenced, watch: true, renews: true, calls: calls(OpCreate)},
	fencedPublishing: {name: "fenced-publishing-period", state: StateFenced, watch: true, renews: true, calls: calls(OpPublish)},
	fencedSettlingEpoch: {name: "fenced-settling-epoch", state: StateFenced, watch: true, renews: true,
		calls: epochCalls},
	evicted: {name: "evicted", state: StateFenced, watch: true, renews: true,
		calls: calls(OpRead, OpCreate, OpUpdate, OpPublish, OpReadEpoch, OpWriteEpoch)},
	evictedReading: {name: "evicted-reading", state: StateFenced, watch: true, renews: true, calls: calls(OpRead)},

	releasingClaim:  {name: "releasing-claim", state: StateIdle, calls: anyCall},
	releasing:       {name: "releasing", state: StateServing, calls: anyCall},
	fencedReleasing: {name: "fenced-releasing", state: StateFenced, calls: anyCall},
	evictedReleasing: {name: "evicted-releasing", state: StateFenced,
		calls: calls(OpRead, OpCreate, OpUpdate, OpPublish, OpReadEpoch, OpWriteEpoch)},
	markingDrained: {name: "marking-drained", state: StateReleased, calls: epochCalls},

	refused:  {name: "refused", state: StateIdle},
	released: {name: "released", state: StateReleased},
	lost:     {name: "lost", state: StateLost},
}

func (s SubState) attrs() attrs {
	if s == 0 || int(s) >= len(subStates) {
		return attrs{}
	}
	return subStates[s]
}

func (s SubState) String() string {
	if a := s.attrs(); a.name != "" {
		return a.name
	}
	return fmt.Sprintf("SubState(%d)", uint8(s))
}

// State is the public state s is part of.
func (s SubState) State() State { return s.attrs().state }

// terminal: the lease is over (only a release's mark of the epoch, drained, follows).
func (s SubState) terminal() bool { return s.State().Terminal() }

// ended: the claim or the lease is over; only a Release (of a refused claim) moves on.
func (s SubState) ended() bool { return s == refused || s.terminal() }

// fencedTwin is the sub-state a serving one becomes when the fence is due: the same call
// in flight, serving nothing.
var fencedTwin = map[SubState]SubState{
	holding:        fenced,
	renewing:       fencedRenewing,
	renewReading:   fencedReading,
	renewCreating:  fencedCreating,
	republishing:   fencedPublishing,
	advancingEpoch: fencedSettlingEpoch,
	releasing:      fencedReleasing,
}
