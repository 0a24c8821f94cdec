package actors

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
)

// Kill makes the receiving actor panic, as a bug would. Every actor under Recover
// obeys it, so tests and the chaos harness can kill any actor while traffic runs.
type Kill struct{ Reason string }

// Panicked is broadcast on the engine's event stream when Recover caught a panic.
type Panicked struct {
	PID    *actor.PID
	Reason any
	Stack  []byte
}

// Restarted is broadcast after a Restarter reset itself following a panic.
type Restarted struct{ PID *actor.PID }

// Restarter is an actor that can reset itself after a recovered panic: stop the
// goroutines and timers it owns, then start again from the durable state its spawner
// keeps, as a fresh instance would. Restart runs on the actor's goroutine.
type Restarter interface {
	Restart(c *actor.Context)
}

// restartLimit is a backstop: Recover catches panics before hollywood sees them, and
// hollywood v1.0.5 crashes the whole process when an actor exceeds its restart limit.
const restartLimit = 1 << 30

// SpawnOpts are the options every actor of ours is spawned with.
func SpawnOpts(id string) []actor.OptFunc {
	return []actor.OptFunc{
		actor.WithID(id),
		actor.WithMiddleware(Recover()),
		actor.WithMaxRestarts(restartLimit),
	}
}

// Recover is the middleware every actor runs under. It turns a panic into a Panicked
// event and, for a Restarter, an in-place restart that keeps the PID (so parents and
// subscribers keep reaching it) and never reaches hollywood's restart limit.
func Recover() actor.MiddlewareFunc {
	return func(next actor.ReceiveFunc) actor.ReceiveFunc {
		return func(c *actor.Context) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				c.Engine().BroadcastEvent(Panicked{PID: c.PID(), Reason: r, Stack: debug.Stack()})
				if rs, ok := c.Receiver().(Restarter); ok {
					rs.Restart(c)
					c.Engine().BroadcastEvent(Restarted{PID: c.PID()})
				}
			}()
			if k, ok := c.Message().(Kill); ok {
				panic(fmt.Sprintf("killed: %s", k.Reason))
			}
			next(c)
		}
	}
}

// Kind is the kind an actor was spawned as, without its id and its parents: "root",
// "ownership", "renewer", "primary", "transfer", "session", "jobs". It names an actor
// in a metric label, where a full PID (with instance and session ids) would not do.
func Kind(pid *actor.PID) string {
	if pid == nil {
		return ""
	}
	kind := pid.ID
	if i := strings.LastIndexByte(kind, '/'); i >= 0 {
		kind = kind[:i] // the id
	}
	if i := strings.LastIndexByte(kind, '/'); i >= 0 {
		kind = kind[i+1:] // the parents
	}
	return kind
}

// WatchPanics calls on for every Panicked broadcast on e's event stream, once each, on
// a watcher actor of its own; stop unsubscribes it and waits until it has stopped.
// Panics broadcast before WatchPanics returns are not seen: call it before spawning
// the actors it should watch.
func WatchPanics(e *actor.Engine, on func(Panicked)) (stop func()) {
	var self atomic.Pointer[actor.PID]
	pid := e.SpawnFunc(func(c *actor.Context) {
		p, ok := c.Message().(Panicked)
		if !ok {
			return
		}
		// A panic in on itself is not reported to on again: it would panic for ever.
		if me := self.Load(); me != nil && p.PID != nil && p.PID.ID == me.ID {
			return
		}
		on(p)
	}, "panics", SpawnOpts("watcher")...)
	self.Store(pid)
	e.Subscribe(pid)
	var once sync.Once
	return func() {
		once.Do(func() {
			e.Unsubscribe(pid)
			<-e.Poison(pid).Done()
		})
	}
}
