package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/lease"
	"go.uber.org/zap"
)

// The fail points the ownership tree and the root host (package failpoint): each site
// is a one-line call to a function here. Without the tag failpoints every check below
// is a constant false, and the code it guards is compiled away.

// renewalStore is the store the renewer writes through: with drop-renewal-reply every
// renewal commits, but its reply is dropped, so its outcome is unknown to the machine.
func renewalStore(s lease.Store, fp *failpoint.Set) lease.Store {
	if failpoint.On(fp, failpoint.DropRenewalReply) {
		return dropRenewalReply{Store: s, fp: fp}
	}
	return s
}

type dropRenewalReply struct {
	lease.Store
	fp *failpoint.Set
}

// Update is the renewal: committed, and answered as if its reply never came.
func (d dropRenewalReply) Update(ctx context.Context, h lease.Holder, rev uint64) (uint64, error) {
	n, err := d.Store.Update(ctx, h, rev)
	if err != nil {
		return n, err
	}
	return 0, fmt.Errorf("actors: the reply of the renewal at revision %d, committed as revision %d, was dropped (fail point %s)",
		rev, n, failpoint.DropRenewalReply)
}

// next is the handover phase after p: the next one, or with release-before-jobs the
// release first and the jobs last (after the drain, before the stop).
func (a *rootActor) next(p Phase) Phase {
	if failpoint.On(a.r.cfg.Failpoints, failpoint.ReleaseBeforeJobs) {
		switch p {
		case PhaseRelaying:
			return PhaseRelease
		case PhaseRelease:
			return PhaseSuccessor
		case PhaseSuccessor:
			return PhaseDrain
		case PhaseSessions:
			return PhaseJobs
		case PhaseJobs:
			return PhaseStop
		}
	}
	return p + 1
}

// stopJobs tells the jobs host to stop; the phase waits for its Drained. With
// release-before-jobs (the lease released a while ago) it tells it only a lease later.
func (a *rootActor) stopJobs(c *actor.Context, msg StopAccepting) (waits bool) {
	if failpoint.On(a.r.cfg.Failpoints, failpoint.ReleaseBeforeJobs) {
		a.later(c, a.r.cfg.Ownership.Config().Lease, msg, a.r.cfg.Jobs)
		return true
	}
	c.Send(a.r.cfg.Jobs, msg)
	return true
}

// stopAccepting tells every member to stop accepting; with serve-after-release only
// lease/2 later (after the successor answered), past the designed overlap of lease/4.
func (a *rootActor) stopAccepting(c *actor.Context, msg StopAccepting) {
	if failpoint.On(a.r.cfg.Failpoints, failpoint.ServeAfterRelease) {
		a.later(c, a.r.cfg.Ownership.Config().Lease/2, msg, a.r.cfg.Members...)
		return
	}
	a.fanOut(c, msg, false)
}

// skipSuccessor reports whether the handover skips its wait for the successor
// (skip-successor): the members stop accepting right after the release, as before
// issue 13, and callers meet the gap until the new holder subscribes.
func (a *rootActor) skipSuccessor() bool {
	return failpoint.On(a.r.cfg.Failpoints, failpoint.SkipSuccessor)
}

// later sends msg to pids after d, from the root, so their replies reach it; stopHeld
// stops the timers that have not fired.
func (a *rootActor) later(c *actor.Context, d time.Duration, msg any, pids ...*actor.PID) {
	e, self := c.Engine(), c.PID()
	a.r.log.Warn("fail point: holding a handover message back", zap.String("message", fmt.Sprintf("%T", msg)), zap.Duration("for", d))
	a.held = append(a.held, time.AfterFunc(d, func() {
		for _, pid := range pids {
			e.SendWithSender(pid, msg, self)
		}
	}))
}

func (a *rootActor) stopHeld() {
	for _, t := range a.held {
		t.Stop()
	}
	a.held = nil
}
