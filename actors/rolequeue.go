package actors

// The queue that runs a member's role commands one step at a time, and the steps
// themselves: a step is the I/O of one command (or a wait of the member's), run on a
// goroutine of a group the member owns, which reports to the member's actor by message.

import (
	"github.com/anthdm/hollywood/actor"
)

// RoleQueue holds a member's role commands: the one whose step runs, and those
// received since, in order. The member's actor owns it and touches it only in Receive.
type RoleQueue struct {
	cur     *RoleCommand
	waiting []*RoleCommand
}

// Push adds cmd behind the commands waiting.
func (q *RoleQueue) Push(cmd *RoleCommand) { q.waiting = append(q.waiting, cmd) }

// Run begins the commands waiting, in order, while no step runs: begin answers a
// command at once and returns false, or starts its step and returns true, and the
// command stays current until Done.
func (q *RoleQueue) Run(begin func(*RoleCommand) (stepped bool)) {
	for q.cur == nil && len(q.waiting) > 0 {
		cmd := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		if begin(cmd) {
			q.cur = cmd
		}
	}
}

// Current is the command whose step runs, or nil.
func (q *RoleQueue) Current() *RoleCommand { return q.cur }

// Waiting is how many commands wait behind the current one.
func (q *RoleQueue) Waiting() int { return len(q.waiting) }

// Done ends the current command and returns it.
func (q *RoleQueue) Done() *RoleCommand {
	cmd := q.cur
	q.cur = nil
	return cmd
}

// StopQueued reports whether a Stop (or a Close) runs or waits.
func (q *RoleQueue) StopQueued() bool {
	if q.cur != nil && q.cur.Stops() {
		return true
	}
	for _, cmd := range q.waiting {
		if cmd.Stops() {
			return true
		}
	}
	return false
}

// Drain empties the queue and returns every command in it, the current first: for a
// member whose actor stopped, which answers them itself.
func (q *RoleQueue) Drain() []*RoleCommand {
	var cmds []*RoleCommand
	if q.cur != nil {
		cmds = append(cmds, q.cur)
	}
	cmds = append(cmds, q.waiting...)
	q.cur, q.waiting = nil, nil
	return cmds
}

// RoleStep is one step goroutine and, once it has finished, its result. The member's
// actor is sent the step itself; the result is kept in it too, so that whoever takes
// the role after an actor that stopped (the next instance, or the member's Close)
// reads the results whose report went to the stopped actor's mailbox.
type RoleStep struct {
	// Cmd is the command the step serves; nil for a wait of the member's own.
	Cmd    *RoleCommand
	result any
	done   chan struct{}
}

// Result is what the step's work returned; read it once Finished (or Done is closed).
func (s *RoleStep) Result() any {
	<-s.done
	return s.result
}

// Done is closed once the result is set.
func (s *RoleStep) Done() <-chan struct{} { return s.done }

// Finished reports, without waiting, whether the result is set.
func (s *RoleStep) Finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// StartStep runs work on a new goroutine of g as a step of cmd, and sends the step to
// self on e once work has returned (its result set first). It reports false, and
// starts nothing, when g is shut.
func StartStep(g *Group, e *actor.Engine, self *actor.PID, cmd *RoleCommand, work func() any) (*RoleStep, bool) {
	s := &RoleStep{Cmd: cmd, done: make(chan struct{})}
	ok := g.Go(func() {
		s.result = work()
		close(s.done)
		e.Send(self, s)
	})
	if !ok {
		return nil, false
	}
	return s, true
}
