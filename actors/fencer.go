package actors

import "github.com/anthdm/hollywood/actor"

// fencer owns the fence timer: it fires lease/2 after the last successful renewal was
// sent, and the machine fences on that tick. It is its own actor so that a renewal that
// hangs (up to lease/4) never holds the fence up.
//
// State: the timer. Goroutines: none (the timer's callback only sends). Messages: it
// takes arm from the ownership actor and sends it tick, and childUp after a restart.
type fencer struct{ timer timer }

func (f *fencer) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Stopped:
		f.timer.stop()
	case arm:
		f.timer.arm(c, m.at)
	}
}

// Restart implements Restarter.
func (f *fencer) Restart(c *actor.Context) {
	f.timer.stop()
	c.Send(c.Parent(), childUp{name: FencerName})
}
