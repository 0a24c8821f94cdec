package actors

import (
	"context"

	"github.com/abi-engine/engine/lease"
)

// HandTo tells the ownership that the next release from serving is a directed
// handover to Target (abi-engine step-down): the release writes the lease's released-to
// form instead of deleting it, so only Target takes it at once (lease/handoff.go). A
// zero Target undoes it. The release itself is still the handover cascade's (Release,
// sent by the root); HandTo only says where it goes.
type HandTo struct{ Target lease.Target }

// HandTo sets the target of the next release and waits until the ownership has it, so
// a handover begun after it hands the lease to t.
func (o *Ownership) HandTo(ctx context.Context, t lease.Target) error {
	o.engine.Send(o.pid, HandTo{Target: t})
	_, err := o.WaitFor(ctx, func(s Status) bool { return s.HandingTo == t })
	return err
}
