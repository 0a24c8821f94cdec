package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// fakeEngine loads with loadErr; it ends with endErr once ended is closed.
type fakeEngine struct {
	loadErr, endErr error
	ended           chan struct{}
	steppedDown     bool
}

func (f *fakeEngine) Healthy() error                 { return nil }
func (f *fakeEngine) Ready() bool                    { return true }
func (f *fakeEngine) Status() any                    { return nil }
func (f *fakeEngine) Load(context.Context) error     { return f.loadErr }
func (f *fakeEngine) Shutdown(context.Context) error { return nil }
func (f *fakeEngine) Done() <-chan struct{}          { return f.ended }
func (f *fakeEngine) Err() error                     { return f.endErr }
func (f *fakeEngine) Registry() *prometheus.Registry { return prometheus.NewRegistry() }
func (f *fakeEngine) InstanceID() string             { return "0123456789abcdef0123456789abcdef" }
func (f *fakeEngine) SteppedDown() bool              { return f.steppedDown }
func (f *fakeEngine) StepDownStay() bool             { return true }

// noSignals is a signal source that never signals.
type noSignals struct{}

func (noSignals) Serve(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// Run's exit codes, the one definition: 3 for a refused Load or an end another engine
// caused, 1 for a failed Load or a lost lease, 0 for a step-down (told to the process).
func TestRunExitCodes(t *testing.T) {
	ended := func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }
	already := &lease.AlreadyServingError{Holder: lease.Holder{InstanceID: "other"}}
	for _, tc := range []struct {
		name string
		eng  *fakeEngine
		want int
	}{
		{"refused", &fakeEngine{loadErr: already}, ExitServing},
		{"store locked", &fakeEngine{loadErr: fmt.Errorf("embedded broker: %w", supervisor.ErrStoreLocked)}, ExitServing},
		{"load failed", &fakeEngine{loadErr: errors.New("no broker")}, ExitRuntime},
		{"lease lost", &fakeEngine{ended: ended(), endErr: &lease.LostError{}}, ExitRuntime},
		{"beaten to the lease", &fakeEngine{ended: ended(), endErr: already}, ExitServing},
		{"stepped down", &fakeEngine{ended: ended(), steppedDown: true}, ExitOK},
		{"ended unasked", &fakeEngine{ended: ended()}, ExitRuntime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.HTTP.Listen = ""
			var stay bool
			err := Run(context.Background(), cfg, tc.eng, Process{
				Tree:        suture.NewSimple("test"),
				Log:         zap.NewNop(),
				Signals:     func(func(), func()) suture.Service { return noSignals{} },
				SteppedDown: func(s bool) { stay = s },
			})
			if got := ExitCode(err); got != tc.want {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.want)
			}
			if tc.eng.steppedDown && !stay {
				t.Fatal("the step-down's stay was not told to the process")
			}
		})
	}
}
