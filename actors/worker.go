package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
)

// The ownership tree's goroutines: the store calls, each on a worker, and the timers of
// its children.

// worker runs an actor's store calls, one goroutine each, which report their outcome
// by message.
type worker struct {
	ctx    context.Context
	cancel context.CancelFunc
	tasks  *Group // the ownership tree's, never shut: Stop waits for it
}

func newWorker(t *Group) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{ctx: ctx, cancel: cancel, tasks: t}
}

func (w *worker) run(e *actor.Engine, to *actor.PID, s lease.Store, op lease.Op) {
	ctx := w.ctx
	w.tasks.Go(func() { e.Send(to, opDone{res: execute(ctx, s, op)}) })
}

// stop cancels the calls in flight; each still reports its end (cancelled: unknown),
// and Ownership.Stop waits for them.
func (w *worker) stop() { w.cancel() }

func execute(ctx context.Context, s lease.Store, op lease.Op) lease.Result {
	ctx, cancel := context.WithTimeout(ctx, op.Timeout)
	defer cancel()
	res := lease.Result{ID: op.ID}
	switch op.Kind {
	case lease.OpRead:
		res.Record, res.Err = s.Read(ctx)
	case lease.OpCreate:
		res.Rev, res.Err = s.Create(ctx, op.Holder)
	case lease.OpUpdate:
		res.Rev, res.Err = s.Update(ctx, op.Holder, op.Revision)
	case lease.OpDelete:
		res.Err = s.Delete(ctx, op.Revision)
	case lease.OpPublish:
		res.Err = s.Publish(ctx, op.Period)
	case lease.OpReadEpoch:
		res.Epoch, res.Err = s.ReadEpoch(ctx)
	case lease.OpWriteEpoch:
		res.Rev, res.Err = s.WriteEpoch(ctx, op.Epoch, op.Revision)
	default:
		res.Err = fmt.Errorf("actors: unknown store call %v", op.Kind)
	}
	return res
}

// timer sends tick to the parent at a time; re-arming replaces it. It is a field of the
// child that owns it, stopped when the child stops or restarts.
type timer struct{ t *time.Timer }

func (t *timer) arm(c *actor.Context, at time.Time) {
	t.stop()
	if at.IsZero() {
		return
	}
	e, parent := c.Engine(), c.Parent()
	t.t = time.AfterFunc(time.Until(at), func() { e.Send(parent, tick{}) })
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}
