package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/abi-engine/engine/internal/failpoint"
)

// Config is what a Machine needs. Lease, StandbyTimeout and Drain come from nats.engine.
type Config struct {
	Me             Holder
	Lease          time.Duration
	StandbyTimeout time.Duration
	// Drain is drain_seconds: the longest a holder defers its epoch bump after taking a
	// lease released by an engine that still drains. 0: it never defers.
	Drain time.Duration
	// Failpoints hosts skip-fencing (package failpoint); nil: none.
	Failpoints *failpoint.Set
	// Hot is nats.engine.standby: hot: a holder of our own rollout (or, both without
	// one, any holder) is waited for as a standby waits, instead of refusing to start,
	// and taken over after a lease of silence; such a wait has no standby timeout.
	Hot bool
}

// Validate reports a configuration the machine cannot run with.
func (c Config) Validate() error {
	var errs []error
	if !c.Me.Known() {
		errs = append(errs, errors.New("lease: config: the holder has no instance id"))
	}
	if c.Lease <= 0 {
		errs = append(errs, fmt.Errorf("lease: config: lease period %s must be positive", c.Lease))
	}
	if c.StandbyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("lease: config: standby timeout %s must be positive", c.StandbyTimeout))
	}
	if c.Drain < 0 {
		errs = append(errs, fmt.Errorf("lease: config: drain %s must not be negative", c.Drain))
	}
	return errors.Join(errs...)
}

// RenewEvery is the renewal period and the bound on every store call: lease/4.
func (c Config) RenewEvery() time.Duration { return c.Lease / 4 }

// FenceAfter is how long a holder may go without a successful renewal: lease/2.
func (c Config) FenceAfter() time.Duration { return c.Lease / 2 }

// mayStandBy: a rollout id of our own that differs from the holder's, or a hot standby.
func (c Config) mayStandBy(h Holder) bool {
	return c.Hot || c.Me.RolloutID != "" && c.Me.RolloutID != h.RolloutID
}

// hotFor reports whether standing by for h is a hot standby's wait for its own
// rollout: one with no timeout.
func (c Config) hotFor(h Holder) bool { return c.Hot && h.RolloutID == c.Me.RolloutID }
