// Package group is the one way the engine owns goroutines: a Group starts them, refuses
// new ones once shut, and lets its owner wait for them with a bound.
package group

import (
	"context"
	"fmt"

	"github.com/abi-engine/engine/internal/notify"
)

// Group owns goroutines: it starts them, refuses new ones once shut, and lets its owner
// wait for them with a bound. It is the one goroutine group of the engine (the ownership
// tree, the root's waits, the jobs' runners, the members' steps, the backend probes,
// the control requests): whoever makes one stops what runs on it and waits for it. A sync.WaitGroup cannot be waited for with a bound (nor
// refuse an Add racing a Wait), so the count is a published notify.Value instead.
type Group struct {
	state *notify.Value[groupState]
}

type groupState struct {
	running int
	shut    bool
}

// New makes an open group.
func New() *Group { return &Group{state: notify.New(groupState{})} }

// Go runs f on a new goroutine of the group, or reports false when the group is shut.
func (g *Group) Go(f func()) bool {
	ok := false
	g.state.Update(func(s groupState) (groupState, bool) {
		if s.shut {
			return s, false
		}
		ok = true
		s.running++
		return s, true
	})
	if !ok {
		return false
	}
	go func() {
		defer g.state.Update(func(s groupState) (groupState, bool) {
			s.running--
			return s, true
		})
		f()
	}()
	return true
}

// Shut refuses new goroutines; those running go on.
func (g *Group) Shut() {
	g.state.Update(func(s groupState) (groupState, bool) { return groupState{running: s.running, shut: true}, !s.shut })
}

// Open takes new goroutines again.
func (g *Group) Open() {
	g.state.Update(func(s groupState) (groupState, bool) { return groupState{running: s.running}, s.shut })
}

// Wait returns once no goroutine of the group runs, or an error naming how many still
// run when ctx ends (wrapping ctx's cause).
func (g *Group) Wait(ctx context.Context) error {
	s, err := g.state.Wait(ctx, func(s groupState) bool { return s.running == 0 })
	if err != nil {
		return fmt.Errorf("%d still running: %w", s.running, err)
	}
	return nil
}

// Running is how many goroutines of the group run now.
func (g *Group) Running() int { return g.state.Load().running }
