//go:build failpoints

package main

import (
	"context"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// TestRunReadsFailpoints: a -tags failpoints binary switches on the fail points of
// ABI_FAILPOINTS, and refuses a bad spec naming its entry before it touches anything.
func TestRunReadsFailpoints(t *testing.T) {
	r := runCLI(t, map[string]string{failpoint.EnvVar: "skip-epoch,clock-rate=fast"}, "run")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, `ABI_FAILPOINTS: failpoint: entry 2 "clock-rate=fast": clock-rate takes a positive number`)

	c, _, _ := cliFor(t, map[string]string{failpoint.EnvVar: "skip-epoch,clock-rate=1.5"})
	got := make(chan *failpoint.Set, 1)
	c.newEngine = func(_ *config.Config, _ *zap.Logger, _ string, _ *suture.Supervisor, fp *failpoint.Set) (runnableEngine, error) {
		got <- fp
		return nil, context.Canceled // stop here: the test is about what reached the engine
	}
	c.execute(context.Background(), []string{"run", "--nats", "nats://127.0.0.1:1"})
	fp := <-got
	if !failpoint.On(fp, failpoint.SkipEpoch) || failpoint.Rate(fp) != 1.5 {
		t.Fatalf("the engine got fail points %q, want skip-epoch,clock-rate=1.5", failpoint.String(fp))
	}
}
