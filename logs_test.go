package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
)

// observed is an engine's log at info and above.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// eventLines are the lines with the field event = ev, or phase = ev for "handover".
func eventLines(logs *observer.ObservedLogs, key, value string) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range logs.All() {
		if v, ok := e.ContextMap()[key]; ok && fmt.Sprint(v) == value {
			out = append(out, e)
		}
	}
	return out
}

// TestLeaseEventsAndHandoverPhasesAreLoggedOnceWithHolderRevisionEpoch: over a
// handover from a to the standby b, each lease event and each handover phase is one
// line at info or above, naming the holder, the revision and the epoch; the lines that
// said the same again (engine serving, engine standing by, handover done) are gone.
func TestLeaseEventsAndHandoverPhasesAreLoggedOnceWithHolderRevisionEpoch(t *testing.T) {
	srv := natstest.Start(t)
	logA, linesA := observed()
	logB, linesB := observed()
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"), engine.WithLogger(logA))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"), engine.WithLogger(logB))
	load(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	testwait.For(t, 10*time.Second, "b's epoch bump", func() bool { return len(eventLines(linesB, "event", "epoch_bumped")) == 1 })

	once := func(who string, logs *observer.ObservedLogs, key, value, holder string) map[string]any {
		t.Helper()
		lines := eventLines(logs, key, value)
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines with %s=%s, want 1: %v", who, len(lines), key, value, lines)
		}
		f := lines[0].ContextMap()
		if _, ok := f["revision"]; !ok {
			t.Errorf("%s %s=%s: no revision in %v", who, key, value, f)
		}
		if _, ok := f["epoch"]; !ok {
			t.Errorf("%s %s=%s: no epoch in %v", who, key, value, f)
		}
		if h, _ := f["holder"].(string); holder != "" && !strings.HasPrefix(h, holder) {
			t.Errorf("%s %s=%s: holder %q, want %s", who, key, value, h, holder)
		}
		return f
	}
	once("a", linesA, "event", "acquired", a.InstanceID())
	once("a", linesA, "event", "released", a.InstanceID())
	for _, phase := range []string{"release", "drain", "sessions", "stop", "drained", "done"} {
		f := once("a", linesA, "phase", phase, "")
		if f["epoch"] != uint64(1) || f["revision"] == uint64(0) {
			t.Errorf("a's handover phase %s: epoch %v revision %v, want epoch 1 and a revision", phase, f["epoch"], f["revision"])
		}
	}
	once("b", linesB, "event", "standing_by", a.InstanceID())
	f := once("b", linesB, "event", "acquired", b.InstanceID())
	if h, _ := f["previous_holder"].(string); !strings.HasPrefix(h, a.InstanceID()) {
		t.Errorf("b acquired from %q, want %s", h, a.InstanceID())
	}
	for who, logs := range map[string]*observer.ObservedLogs{"a": linesA, "b": linesB} {
		for _, dup := range []string{"engine serving", "engine standing by", "handover done"} {
			if n := logs.FilterMessage(dup).Len(); n != 0 {
				t.Errorf("%s logged %q %d times at info: the lease or the root said it already", who, dup, n)
			}
		}
	}
}
