package node

import (
	"errors"
	"testing"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
)

// TestViewIsTheOneDefinitionOfServing: where the engine stands, its epoch and whether a
// step-down may begin all follow from one view, as /status, the metrics and step-down
// read it: a lease taken shows as serving only once the root has confirmed every
// member serves (or a member failed: the engine holds the lease), the epoch is 0 while
// the engine does not serve, and a step-down begins only while the root relays.
func TestViewIsTheOneDefinitionOfServing(t *testing.T) {
	serving := actors.Status{State: lease.StateServing, Epoch: 7}
	failing := []actors.MemberFailure{{Member: "primary/keyvalue", Err: errors.New("refused")}}
	for _, c := range []struct {
		name      string
		v         View
		rootState lease.State
		state     string
		epoch     uint64
		handOver  bool
	}{
		{"loading", View{Role: config.RoleServe, Lease: serving, HasLease: true, HasRoot: true, Phase: actors.PhaseRelaying},
			lease.StateServing, StateIdle, 0, true},
		{"client", View{Up: true, Role: config.RoleClient}, 0, StateClient, 0, false},
		{"no lease", View{Up: true, Role: config.RoleServe}, 0, StateIdle, 0, false},
		{"standby", View{Up: true, Role: config.RoleServe, HasLease: true, Lease: actors.Status{State: lease.StateStandby}, HasRoot: true, Phase: actors.PhaseRelaying},
			lease.StateStandby, "standby", 0, false},
		{"taken, root not yet confirmed", View{Up: true, Role: config.RoleServe, Lease: serving, HasLease: true, HasRoot: true, Phase: actors.PhaseRelaying},
			lease.StateStandby, "standby", 0, true},
		{"serving", View{Up: true, Role: config.RoleServe, Lease: serving, HasLease: true, HasRoot: true, Phase: actors.PhaseRelaying},
			lease.StateServing, "serving", 7, true},
		{"serving, a member failing", View{Up: true, Role: config.RoleServe, Lease: serving, HasLease: true, HasRoot: true, Phase: actors.PhaseRelaying, Failing: failing},
			lease.StateStandby, "serving", 7, true},
		{"handing over", View{Up: true, Role: config.RoleServe, Lease: serving, HasLease: true, HasRoot: true, Phase: actors.PhaseJobs},
			lease.StateServing, "serving", 7, false},
		{"taken, no root", View{Up: true, Role: config.RoleServe, Lease: serving, HasLease: true},
			0, StateIdle, 0, false},
		{"fenced", View{Up: true, Role: config.RoleServe, Lease: actors.Status{State: lease.StateFenced, Epoch: 7}, HasLease: true, HasRoot: true, Phase: actors.PhaseRelaying},
			lease.StateFenced, "fenced", 0, false},
	} {
		v := c.v
		v.State = v.state(c.rootState)
		if v.State != c.state || v.Epoch() != c.epoch || v.CanHandOver() != c.handOver {
			t.Errorf("%s: state, epoch, can hand over = %s, %d, %v; want %s, %d, %v",
				c.name, v.State, v.Epoch(), v.CanHandOver(), c.state, c.epoch, c.handOver)
		}
	}
}
