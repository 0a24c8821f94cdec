package engine_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/abi-engine/engine/primaries"
)

// TestEveryEndStopsAndReleasesOnce: whichever way the engine ends — a signal
// (Shutdown), abi-engine step-down, a lost lease, a Load that fails once its members
// were told to serve — it runs one end, the members are told Stop once (by the root's
// cascade, or else by the teardown) and closed once, and the lease is released once
// (none when it was lost): the teardown after a cascade does not do it again.
func TestEveryEndStopsAndReleasesOnce(t *testing.T) {
	once := map[string]int32{"endings": 1, "member stops": 1, "member closes": 1, "releases": 1}
	lost := maps.Clone(once)
	lost["releases"] = 0

	t.Run("signal", func(t *testing.T) {
		srv := natstest.Start(t)
		e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
		load(t, e)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		// A second Shutdown joins the end: nothing more is stopped.
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		checkEnd(t, e, once, 1)
	})

	t.Run("step-down", func(t *testing.T) {
		srv := natstest.Start(t)
		holder := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"))
		load(t, holder)
		standby := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"))
		load(t, standby)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := control.RequestStepDown(ctx, natstest.Connect(t, srv.URL()), holder.InstanceID(), control.StepDownRequest{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-holder.Done():
		case <-ctx.Done():
			t.Fatal("the holder did not hand over")
		}
		if !holder.SteppedDown() {
			t.Fatal("SteppedDown is false after a step-down")
		}
		// The signal that follows a step-down joins its end.
		if err := holder.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		checkEnd(t, holder, once, 1)
	})

	t.Run("lost lease", func(t *testing.T) {
		srv := natstest.Start(t)
		e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
		load(t, e)
		loseLease(t, e, srv.URL())
		if e.Err() == nil {
			t.Fatal("Err is nil after a lost lease")
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkEnd(t, e, lost, 0)
	})

	t.Run("failed load", func(t *testing.T) {
		srv := natstest.Start(t)
		// The service's store refuses every epoch: its primary never serves, so Load
		// waits for the services until it is cancelled, once every member was told
		// Serve (the store was asked).
		fence := &refusingFence{asked: make(chan struct{})}
		svc := engine.Service{Name: "stuck", Data: engine.SharedData(),
			Operations: map[string]primaries.Operation{"op": func(context.Context, []byte) ([]byte, error) { return nil, nil }},
			Fence:      fence}
		e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"), engine.WithService(svc))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		loaded := make(chan error, 1)
		go func() { loaded <- e.Load(ctx) }()
		select {
		case <-fence.asked:
			cancel()
		case err := <-loaded:
			t.Fatalf("Load returned %v before the service's store was asked", err)
		}
		if err := <-loaded; err == nil {
			t.Fatal("Load succeeded with a service that cannot serve")
		}
		select {
		case <-e.Done():
		default:
			t.Fatal("Done not closed after a failed Load")
		}
		if r := leaseRecord(t, srv.URL()); !r.Free() {
			t.Fatalf("lease after a failed Load: %v", r)
		}
		checkEnd(t, e, once, 1)
	})
}

// refusingFence is a store that refuses every epoch; asked closes at the first.
type refusingFence struct {
	asked chan struct{}
	once  sync.Once
}

func (f *refusingFence) AdoptEpoch(context.Context, uint64) error {
	f.once.Do(func() { close(f.asked) })
	return errors.New("this store refuses every epoch")
}

// checkEnd compares e's end counts with want, and the releases of the lease as the
// lease machine counts them (released, handed off to a step-down's target, skipped or
// failed) with released.
func checkEnd(t *testing.T, e *engine.Engine, want map[string]int32, released float64) {
	t.Helper()
	if got := engine.EndCounts(e); !maps.Equal(got, want) {
		t.Errorf("the end counted %v, want %v", got, want)
	}
	var got float64
	for _, kind := range []string{"released", "handed_off", "release_skipped", "release_failed"} {
		got += leaseEvents(t, e, kind)
	}
	if got != released {
		t.Errorf("the lease was released %v times, want %v", got, released)
	}
}

// leaseEvents is abi_engine_lease_events_total{event=kind}.
func leaseEvents(t *testing.T, e *engine.Engine, kind string) float64 {
	t.Helper()
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "abi_engine_lease_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "event" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// loseLease has another engine ("thief") write the lease e holds, and waits until e
// has ended for losing it.
func loseLease(t *testing.T, e *engine.Engine, url string) {
	t.Helper()
	s, err := jetstreamstore.Open(context.Background(), natstest.Connect(t, url), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), leasetest.Holder("thief", "").Encode()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not end after losing its lease")
	}
}
