package actors

import (
	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
)

// renewer owns the renewal timer (lease/4) and runs the calls that keep the lease: the
// renewals, the reads and creates after a conflict or an eviction, and the publish of
// our lease period, each cut off after its timeout. A busy claim or release call on the
// ownership actor's worker never delays a renewal.
//
// State: the timer and the worker (the context its calls run under). Goroutines: one per
// call, started here, cancelled when the renewer stops or restarts, waited for by
// Ownership.Stop; each reports its outcome to the ownership actor (opDone). Messages: it
// takes arm and runOp from the ownership actor and sends it tick, opDone, and childUp
// after a restart.
type renewer struct {
	store  lease.Store
	tasks  *Group
	timer  timer
	worker *worker
}

func (r *renewer) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		r.worker = newWorker(r.tasks)
	case actor.Stopped:
		r.timer.stop()
		r.worker.stop()
	case arm:
		r.timer.arm(c, m.at)
	case runOp:
		r.worker.run(c.Engine(), c.Parent(), r.store, m.op)
	}
}

// Restart implements Restarter: the timer is gone until the ownership actor arms it
// again; a call in flight is cancelled and reports its end (an unknown outcome).
func (r *renewer) Restart(c *actor.Context) {
	r.timer.stop()
	r.worker.stop()
	r.worker = newWorker(r.tasks)
	c.Send(c.Parent(), childUp{name: RenewerName})
}
