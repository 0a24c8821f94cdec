package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/runner"
	"github.com/abi-engine/engine/supervisor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// This file is how the process scenarios run an embedder's engine without a binary
// of its own: the harness starts this very program again with envEngineConfig naming
// the engine's configuration file, and EngineProcess, called first thing in main or
// TestMain, serves the engine of Options.Engine the way `abi-engine run` does.

// envEngineConfig names the configuration file of an engine process of this program.
const envEngineConfig = "ABI_CHAOS_ENGINE_CONFIG"

// childArgs are the arguments of an engine process of this program. A test binary
// that does not call EngineProcess runs no test with them, and exits at once instead
// of running the harness again.
var childArgs = []string{"-test.run=^$"}

// childStopBound bounds the teardown of the process's tree once the engine has ended.
const childStopBound = 30 * time.Second

// EngineProcess serves newEngine's engine and exits when this process is an engine
// process the harness started (a process scenario run with Options.Engine and no
// Options.Binary), and returns at once otherwise. Call it first thing in main, or in
// TestMain before m.Run:
//
//	func TestMain(m *testing.M) {
//		chaos.EngineProcess(newEngine)
//		os.Exit(m.Run())
//	}
//
// The engine process runs as `abi-engine run --config FILE` does, through the same
// code (internal/runner): it serves /healthz, /readyz, /status and /metrics on
// http.listen, hands over on the first SIGTERM, SIGINT or SIGHUP and stops at once on
// a second, logs JSON to stderr, and exits with runner's codes: 0 after a handover
// (a step-down's too), 1 when the engine ended on its own (a lost lease) or failed, 2
// for a bad configuration and 3 when another engine serves.
func EngineProcess(newEngine EngineFunc) {
	path := os.Getenv(envEngineConfig)
	if path == "" {
		return
	}
	os.Exit(serveEngine(path, newEngine, os.Getenv, os.Stderr))
}

// serveEngine is EngineProcess but os.Exit: it returns the exit code.
func serveEngine(path string, newEngine EngineFunc, env func(string) string, out io.Writer) int {
	cfg, err := config.Load(path, env)
	if err != nil {
		fmt.Fprintln(out, err)
		return runner.ExitUsage
	}
	var level zapcore.Level
	if err := level.Set(cfg.Log.Level); err != nil {
		level = zapcore.InfoLevel
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(zapcore.AddSync(out)), level))
	defer log.Sync() //nolint:errcheck // stderr may not support sync
	fail := func(code int, err error) int {
		log.Error("engine process ends", zap.Int("exit_code", code), zap.Error(err))
		return code
	}
	fp, err := runner.Failpoints(env, "program", "-tags failpoints")
	if err != nil {
		return fail(runner.ExitUsage, err)
	}
	tree := supervisor.NewTree("abi-engine chaos engine", log, childStopBound)
	eng, err := newEngine(cfg, engine.WithLogger(log), engine.WithSupervisor(tree), engine.WithFailpoints(fp))
	if err != nil {
		return fail(runner.ExitUsage, err)
	}
	// The run of `abi-engine run`, the same code (internal/runner).
	if err := runner.Run(context.Background(), cfg, eng, runner.Process{Tree: tree, Log: log}); err != nil {
		return fail(runner.ExitCode(err), err)
	}
	return runner.ExitOK
}
