package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/abi-engine/engine/chaos"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/spf13/cobra"
)

func (c *cli) chaosCommand() *cobra.Command {
	var scenario, out, secretFile string
	var asJSON bool
	var opts chaos.Options
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a chaos scenario: real engines, faults, traffic, invariant checks",
		Long: `chaos runs one scenario against real engines and an in-process broker: it drives
traffic, injects the scenario's faults on a schedule drawn from --seed, records every
call and checks the invariants (zero failed calls across clean handovers, every call
after a takeover answered, no two engines serving at once outside the handover overlap,
a linearizable keyvalue history, no leaks). It prints a report table (with --json, the
report as JSON) and, with --out,
writes report.json, timeline.svg, history.json and the engines' logs. The same
scenario, duration and seed replay the same schedule. It exits 1 when a check fails.

Scenarios: ` + strings.Join(chaos.Names(), ", ") + `.

zombie-write and clock-skew switch fail points on inside their engines (a write stalled
between its lease check and the write; a lease clock that runs fast), and so does
--failpoints-holder/--failpoints-others: they need a binary built with them, which a
release binary is not (go build -tags failpoints ./cmd/abi-engine). Without them the
command refuses, exit 2. docs/chaos.md lists the fail points and what each shows.

--protobuf adds to the JSON keyvalue traffic the same mix of calls in protobuf, as the
Python clients make them, at once; protobuf calls need service tokens, so the engines
then require them, signed with --jwt-secret-file (else ABI_JWT_SECRET_FILE), or with a
secret of the run's own.`,
		Example: `  abi-engine chaos --scenario rolling-deploy --duration 10m --seed 7 --out soak/
  abi-engine chaos --scenario rolling-deploy --duration 60s --protobuf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, ok := chaos.Lookup(scenario); !ok {
				return usageError(&flagError{fmt.Errorf("--scenario %q is not one of %s", scenario, strings.Join(chaos.Names(), ", "))})
			}
			bin, err := os.Executable()
			if err != nil {
				return runtimeError(fmt.Errorf("find the abi-engine binary for the process scenarios: %w", err))
			}
			if !cmd.Flags().Changed("jwt-secret-file") && c.env != nil {
				secretFile = c.env(config.EnvJWTSecretFile)
			}
			if secretFile != "" {
				if opts.JWTSecret, err = servicetoken.ReadSecretFile(secretFile); err != nil {
					return usageError(&flagError{fmt.Errorf("--jwt-secret-file: %w", err)})
				}
			}
			opts.Binary = bin
			opts.Out = out
			opts.Log = c.stderr
			rep, err := chaos.Run(cmd.Context(), scenario, opts)
			if err != nil && rep == nil {
				if errors.Is(err, chaos.ErrUnknownScenario) || errors.Is(err, chaos.ErrNoFailpoints) {
					return usageError(err)
				}
				return runtimeError(err)
			}
			show := rep.Table
			if asJSON {
				show = rep.WriteJSON
			}
			if terr := show(c.stdout); terr != nil {
				return runtimeError(terr)
			}
			if err != nil {
				return runtimeError(err)
			}
			if !rep.Passed {
				return runtimeError(fmt.Errorf("scenario %s failed its checks; replay with: %s", scenario, rep.Command))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenario, "scenario", "", "the scenario to run (required)")
	f.DurationVar(&opts.Duration, "duration", 0, "how long to keep injecting faults (0: the scenario's short fixed schedule)")
	f.Int64Var(&opts.Seed, "seed", 1, "seed of the fault schedule and the traffic")
	f.DurationVar(&opts.Lease, "lease", time.Second, "the engines' lease period")
	f.IntVar(&opts.Concurrency, "concurrency", 8, "traffic workers")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (what --out writes to report.json) instead of the table")
	f.StringVar(&out, "out", "", "directory for report.json, timeline.svg, history.json and logs")
	f.StringVar(&opts.Failpoints.Holder, "failpoints-holder", "", "fail points of the first engine, e.g. skip-fencing (a -tags failpoints binary)")
	f.StringVar(&opts.Failpoints.Others, "failpoints-others", "", "fail points of every later engine (a -tags failpoints binary)")
	f.Float64Var(&opts.ClockRate, "clock-rate", 1.5, "clock-skew: how fast the fast engine's lease clock runs against the real one")
	f.StringVar(&opts.KeyValue, "keyvalue", chaos.KeyValueJetStream, "the keyvalue backend the engines share: jetstream or postgres")
	f.StringVar(&opts.PostgresURL, "postgres-url", "", "the PostgreSQL database of --keyvalue postgres (a table of the run's own is created and dropped)")
	f.BoolVar(&opts.Cluster, "cluster", false, "run on a 3-node cluster with R3 buckets instead of one broker (zombie-write)")
	f.BoolVar(&opts.Protobuf, "protobuf", false, "also drive keyvalue in protobuf, as the Python clients do, beside the JSON traffic")
	f.StringVar(&secretFile, "jwt-secret-file", "", "file holding the HS256 secret the engines require service tokens signed with (default: ABI_JWT_SECRET_FILE; none: no tokens, unless --protobuf makes one)")
	_ = cmd.MarkFlagRequired("scenario")
	return cmd
}
