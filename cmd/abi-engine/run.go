package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/runner"
	"github.com/abi-engine/engine/supervisor"
	"github.com/spf13/cobra"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// runnableEngine is what `abi-engine run` needs of an engine (*engine.Engine).
type runnableEngine = runner.Engine

// engineFactory builds the engine of a configuration that was loaded and validated.
// The engine's services (broker, connections, actors, backends) join tree, the one
// supervision tree of the process, which `run` serves.
// fp is the fail points of ABI_FAILPOINTS (a -tags failpoints binary), nil for none.
type engineFactory func(cfg *config.Config, log *zap.Logger, version string, tree *suture.Supervisor, fp *failpoint.Set) (runnableEngine, error)

// signalSource is the suture service that calls first on the first stop request
// (SIGTERM, SIGINT or SIGHUP) and second on every later one.
type signalSource func(first, second func()) suture.Service

func newSignals(first, second func()) suture.Service {
	return &supervisor.Signals{OnFirst: first, OnSecond: second}
}

var (
	logFormats = []string{"json", "console", config.LogFormatAuto}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// treeStopTimeout is how long a service of the process's tree may take to stop before
// suture reports it: the engine's actors take up to their own bounds (10 s) to stop.
const treeStopTimeout = 30 * time.Second

type runFlags struct {
	config, role, nats, http, logFormat, logLevel string
}

func (c *cli) runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run an engine until SIGTERM, then hand over",
		Long: `run starts an engine in its role (serve, client or auto). A serving engine takes the
lease, stands by while an engine of another rollout serves, or fails (exit 3) naming the
engine that serves. The first SIGTERM, SIGINT or SIGHUP hands over: jobs stop, the lease
is released, the calls and sessions already received are answered for up to
drain_seconds, and the process exits 0. A second signal stops at once. An engine that
loses its lease, or a standby that is not handed it within standby_timeout_seconds,
exits 1; so does one that cannot reach the broker within nats.connect_timeout_seconds
at start, or cannot serve its HTTP endpoints.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.runEngine(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "configuration file (default: abi-engine.yaml in the working directory, if any)")
	fl.StringVar(&f.role, "role", "", "serve, client or auto (default: ABI_ENGINE_ROLE, else nats.engine.role)")
	fl.StringVar(&f.nats, "nats", "", `NATS server URLs, comma-separated; "" starts the embedded server (default: ABI_NATS_URL, else nats.url)`)
	fl.StringVar(&f.http, "http", "", `host:port of /healthz, /readyz, /status and /metrics; "" turns it off (default: http.listen)`)
	fl.StringVar(&f.logFormat, "log-format", "", "json, console, or auto: console on a terminal, JSON otherwise (default: log.format)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default: log.level)")
	return cmd
}

func (c *cli) runEngine(cmd *cobra.Command, f runFlags) error {
	fp, err := runner.Failpoints(c.env, "abi-engine", "go build -tags failpoints ./cmd/abi-engine")
	if err != nil {
		return usageError(err)
	}
	changed := cmd.Flags().Changed
	var overrides []config.Override
	if changed("role") {
		overrides = append(overrides, config.RoleFlag(f.role))
	}
	if changed("nats") {
		overrides = append(overrides, config.NATSURLFlag(f.nats))
	}
	if changed("http") {
		overrides = append(overrides, config.HTTPListenFlag(f.http))
	}
	if changed("log-format") && !slices.Contains(logFormats, f.logFormat) {
		return usageError(&flagError{fmt.Errorf("--log-format %q: must be json, console or auto", f.logFormat)})
	}
	if changed("log-level") && !slices.Contains(logLevels, f.logLevel) {
		return usageError(&flagError{fmt.Errorf("--log-level %q: must be debug, info, warn or error", f.logLevel)})
	}
	cfg, err := config.Load(f.config, c.env, overrides...)
	if err != nil {
		return usageError(err)
	}
	if changed("log-format") {
		cfg.Log.Format = f.logFormat
	}
	if changed("log-level") {
		cfg.Log.Level = f.logLevel
	}
	log, err := newLogger(cfg.Log.Format, cfg.Log.Level, c.stderr)
	if err != nil {
		return usageError(err)
	}
	defer log.Sync() //nolint:errcheck // stderr may not support sync; nothing to do about it
	if c.memLimit && c.env("GOMEMLIMIT") == "" {
		// Without it, garbage may double the heap before a collection: an engine whose
		// sessions hold their whole budget would pass its pod's limit.
		limit := cfg.Limits.RuntimeMemoryLimit()
		debug.SetMemoryLimit(limit)
		log.Debug("Go runtime memory limit set from limits.memory_mib", zap.Int64("bytes", limit))
	}
	if c.routeSlog {
		slog.SetDefault(slog.New(zapslog.NewHandler(log.Core(), zapslog.WithName("hollywood"))))
	}
	// One tree for the process: the HTTP server and the signal handler (serve adds
	// them) and everything the engine starts.
	tree := supervisor.NewTree("abi-engine", log, treeStopTimeout)
	eng, err := c.newEngine(cfg, log, c.version, tree, fp)
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			return usageError(err)
		}
		return runtimeError(err)
	}
	return c.serve(cmd.Context(), cfg, eng, tree, log)
}

// serve runs eng in the process's tree until it ends (internal/runner: the one run of
// an engine process, which the chaos harness's engine processes share).
func (c *cli) serve(ctx context.Context, cfg *config.Config, eng runnableEngine, tree *suture.Supervisor, log *zap.Logger) error {
	return runner.Run(ctx, cfg, eng, runner.Process{
		Tree:    tree,
		Log:     log,
		Version: c.version,
		Signals: c.signals,
		Ended: func(ctx context.Context, err error) error {
			return nameLostHolder(ctx, cfg, eng, err)
		},
		SteppedDown: func(stay bool) { c.stayAsStandby = stay },
	})
}
