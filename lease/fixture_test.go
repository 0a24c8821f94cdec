package lease

import (
	"testing"
	"time"
)

// The fixture of the internal tests (the transition table's, which drive a machine
// sub-state by sub-state); the external tests (package lease_test) name the same values
// in machine_test.go. Named time fixtures: a 1 s lease renews every 250 ms and fences
// after 500 ms.
const (
	lease   = time.Second
	renew   = lease / 4
	fence   = lease / 2
	standby = 5 * time.Second
	drain   = 2*lease + renew/2 // the fixture's drain_seconds (no renewal falls on it): how long a bump may be deferred
)

var t0 = time.Date(2026, 10, 6, 10, 0, 0, 0, time.UTC)

// holder is the fixture's engine: engine-name on host-name, of a rollout.
func holder(name, rollout string) Holder {
	return Holder{InstanceID: "engine-" + name, Host: "host-" + name, PID: 1000, Version: "1.2.3",
		RolloutID: rollout, StartedAt: "2026-10-06T10:00:00Z"}
}

// newMachine is the test hook on the transition table: a test fails if its machine
// ever made a move the table does not allow, or broke one of its invariants.
func newMachine(t *testing.T, cfg Config) *Machine {
	t.Helper()
	m, err := NewMachine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n, err := m.Illegal(); n != 0 {
			t.Errorf("%d illegal transitions; the last: %v", n, err)
		}
	})
	return m
}
