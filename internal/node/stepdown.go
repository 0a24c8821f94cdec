package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/internal/servicetree"
	"github.com/abi-engine/engine/lease"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// This file is the engine's side of abi-engine step-down and evict (package control):
// it answers the roll call of standbys while it stands by, and a step-down request
// while it serves, by directing its release to the chosen standby and running the same
// handover as SIGTERM.

// svcControl is the control subjects' service in the tree; it stops first, so no
// step-down request begins behind the teardown.
const svcControl = "control"

// serveControl subscribes the control subjects on nc, the service connection.
func (e *Engine) serveControl(nc *nats.Conn) error {
	s, err := control.Serve(nc, e.me.InstanceID, controlEngine{e})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.tree.Add(svcControl, servicetree.OnStop{Name: svcControl, Stop: s.Stop})
	return nil
}

// SteppedDown reports whether the engine handed over because abi-engine step-down
// asked it to (its end is then a clean one, as after SIGTERM).
func (e *Engine) SteppedDown() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.end != nil && e.end.kind == endStepDown
}

// StepDownStay reports whether that step-down asked the process to stay as a standby.
func (e *Engine) StepDownStay() bool { return e.stepDownStay.Load() }

// controlEngine is the Engine the control server asks.
type controlEngine struct{ e *Engine }

func (c controlEngine) handles() (*actors.Ownership, *actors.Root) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.e.ownership, c.e.root
}

func (c controlEngine) AsStandby() (control.Standby, bool) {
	own, _ := c.handles()
	if own == nil {
		return control.Standby{}, false
	}
	st := own.Status()
	if st.State != lease.StateStandby {
		return control.Standby{}, false
	}
	return control.Standby{InstanceID: c.e.me.InstanceID, RolloutID: c.e.me.RolloutID, Since: st.Since,
		Hot: c.e.cfg.NATS.Engine.HotStandby()}, true
}

// Serving reports whether a step-down may begin (View.CanHandOver).
func (c controlEngine) Serving() bool { return c.e.View().CanHandOver() }

// HandOver directs the release and begins the engine's end with the handover
// (lifecycle.go): the engine owns it, and a Shutdown waits for it and, when its ctx
// ends, cuts it short.
func (c controlEngine) HandOver(ctx context.Context, t lease.Target, stay bool) error {
	e := c.e
	own, _ := c.handles()
	if own == nil {
		return errors.New("the engine has no lease")
	}
	if !e.steppingDown.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: another step-down of this engine began first", control.ErrNotServing)
	}
	e.mu.Lock()
	ending := e.stage >= stageEnding
	e.mu.Unlock()
	if ending {
		return fmt.Errorf("%w: it is already handing over (stopped, or stepping down)", control.ErrNotServing)
	}
	if err := own.HandTo(ctx, t); err != nil {
		if !c.Serving() {
			// Evicted, fenced or lost while the target was being set: nothing to hand over.
			return fmt.Errorf("%w: it stopped serving as the step-down began (%s)", control.ErrNotServing, own.Status().State)
		}
		e.steppingDown.Store(false)
		return err
	}
	e.stepDownStay.Store(stay)
	e.log.Info("step-down requested: handing over", zap.Stringer("to", t), zap.Bool("stay", stay))
	e.beginEnd(endStepDown, nil)
	return nil
}
