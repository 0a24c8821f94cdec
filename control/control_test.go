package control

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// engine is a control.Engine of a test: standing by since a time, or serving, and
// recording the handovers it was asked for.
type engine struct {
	sb      Standby
	standby bool
	serving bool
	mu      sync.Mutex
	handed  []lease.Target
}

func (e *engine) AsStandby() (Standby, bool) { return e.sb, e.standby }
func (e *engine) Serving() bool              { return e.serving }
func (e *engine) HandOver(_ context.Context, t lease.Target, _ bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handed = append(e.handed, t)
	return nil
}

func (e *engine) handovers() []lease.Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]lease.Target(nil), e.handed...)
}

func TestChooseTakesTheLongestWaiting(t *testing.T) {
	t0 := time.Now()
	sbs := []Standby{
		{InstanceID: "b", RolloutID: "v3", Since: t0.Add(time.Second)},
		{InstanceID: "a", RolloutID: "v2", Since: t0.Add(2 * time.Second)},
		{InstanceID: "self", RolloutID: "v2", Since: t0},
		{InstanceID: "c", RolloutID: "v3", Since: t0.Add(3 * time.Second)},
	}
	if got, ok := Choose(sbs, "", "self"); !ok || got.InstanceID != "b" {
		t.Fatalf("any: %v %v, want b", got, ok)
	}
	if got, ok := Choose(sbs, "v2", "self"); !ok || got.InstanceID != "a" {
		t.Fatalf("v2: %v %v, want a", got, ok)
	}
	if _, ok := Choose(sbs, "v9", "self"); ok {
		t.Fatal("v9 qualified")
	}
	if tg := TargetFor(sbs[0], "v3"); tg != (lease.Target{RolloutID: "v3"}) {
		t.Fatalf("with --to: %v", tg)
	}
	if tg := TargetFor(sbs[0], ""); tg != (lease.Target{InstanceID: "b", RolloutID: "v3"}) {
		t.Fatalf("without --to: %v", tg)
	}
}

// TestStepDownOverARealBroker: the serving engine's control server calls the roll
// call, hands over to the standby that qualifies, and refuses (changing nothing) when
// none does or when it does not serve.
func TestStepDownOverARealBroker(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	t0 := time.Now().UTC().Truncate(time.Second)
	holder := &engine{serving: true}
	v2 := &engine{standby: true, sb: Standby{InstanceID: "i-v2", RolloutID: "v2", Since: t0}}
	v3 := &engine{standby: true, sb: Standby{InstanceID: "i-v3", RolloutID: "v3", Since: t0.Add(time.Second)}}
	for id, e := range map[string]*engine{"i-holder": holder, "i-v2": v2, "i-v3": v3} {
		s, err := Serve(natstest.Connect(t, srv.URL()), id, e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got, err := Standbys(ctx, nc, RollCallWindow)
	if err != nil || len(got) != 2 {
		t.Fatalf("roll call: %v, %v; want the two standbys", got, err)
	}
	if _, err := RequestStepDown(ctx, nc, "i-holder", StepDownRequest{To: "v9"}); !errors.Is(err, ErrNoStandby) {
		t.Fatalf("--to v9: %v, want ErrNoStandby", err)
	}
	if h := holder.handovers(); len(h) != 0 {
		t.Fatalf("a refused step-down handed over: %v", h)
	}
	if _, err := RequestStepDown(ctx, nc, "i-v2", StepDownRequest{}); !errors.Is(err, ErrNotServing) {
		t.Fatalf("asking a standby: %v, want ErrNotServing", err)
	}
	if _, err := RequestStepDown(ctx, nc, "nobody", StepDownRequest{}); err == nil || errors.Is(err, ErrNoStandby) {
		t.Fatalf("asking nobody: %v", err)
	}
	s, err := RequestStepDown(ctx, nc, "i-holder", StepDownRequest{To: "v3"})
	if err != nil || s.InstanceID != "i-v3" {
		t.Fatalf("--to v3: %v, %v", s, err)
	}
	s, err = RequestStepDown(ctx, nc, "i-holder", StepDownRequest{})
	if err != nil || s.InstanceID != "i-v2" {
		t.Fatalf("no --to: %v, %v; want the longest-waiting, v2", s, err)
	}
	want := []lease.Target{{RolloutID: "v3"}, {InstanceID: "i-v2", RolloutID: "v2"}}
	if h := holder.handovers(); len(h) != 2 || h[0] != want[0] || h[1] != want[1] {
		t.Fatalf("handovers %v, want %v", h, want)
	}
}

// AnyStandby is true at the first standby's answer and false once its context ends
// with only engines that do not stand by subscribed.
func TestAnyStandbyOverARealBroker(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	holder := &engine{serving: true}
	s, err := Serve(natstest.Connect(t, srv.URL()), "i-holder", holder)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ask := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		found, err := AnyStandby(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if ask() {
		t.Fatal("AnyStandby with only the holder subscribed = true")
	}
	v2 := &engine{standby: true, sb: Standby{InstanceID: "i-v2", RolloutID: "v2", Since: time.Now()}}
	s2, err := Serve(natstest.Connect(t, srv.URL()), "i-v2", v2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Stop)
	if !ask() {
		t.Fatal("AnyStandby with a standby subscribed = false")
	}
}
