package main

import (
	"context"
	"github.com/abi-engine/engine/internal/leakcheck"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/thejerf/suture/v4"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(leakcheck.Known(), goleak.Cleanup(func(int) { removeBuiltBinary() }))...)
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\n--- stdout:\n" + r.stdout + "--- stderr:\n" + r.stderr
}

// envOf is an environment holding only vars.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// cliFor is the CLI as run builds it, with its own environment and outputs, and an
// engine factory that fails the test if `run` ever gets that far.
func cliFor(t *testing.T, env map[string]string) (*cli, *testproc.Output, *testproc.Output) {
	t.Helper()
	stdout, stderr := &testproc.Output{}, &testproc.Output{}
	c := &cli{
		env:     envOf(env),
		stdout:  stdout,
		stderr:  stderr,
		version: "v0.0.0-test",
		newEngine: func(*config.Config, *zap.Logger, string, *suture.Supervisor, *failpoint.Set) (runnableEngine, error) {
			t.Error("run built an engine; this test expected it to stop before")
			return nil, context.Canceled
		},
		signals: newSignals,
	}
	return c, stdout, stderr
}

// runCLI runs the command line args in-process.
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	c, stdout, stderr := cliFor(t, env)
	code := c.execute(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

func wantContains(t *testing.T, what, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Errorf("%s does not contain %q:\n%s", what, s, out)
		}
	}
}
