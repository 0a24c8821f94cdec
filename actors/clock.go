package actors

import "github.com/abi-engine/engine/internal/clock"

// Clock is the time the ownership tree, the root and the jobs run on (package clock's
// one Clock): the lease machine reads Now, and the timers, the gate and the calls'
// timeouts map its times back to the real time line with Real. A nil Clock in a config
// is the real one; the chaos harness gives an engine a faster one (fail point
// clock-rate) to show how much skew the lease bears (docs/chaos.md, clock-skew).
type Clock = clock.Clock
