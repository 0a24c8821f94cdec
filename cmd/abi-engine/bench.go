package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/client"
	"github.com/spf13/cobra"
)

// benchInstance is the instance id the header-stamping echo of --raw stamps: 32 hex
// digits, as long as an engine's.
const benchInstance = "0123456789abcdef0123456789abcdef"

func (c *cli) benchCommand() *cobra.Command {
	var natsURL, jsonPath string
	var raw bool
	cfg := bench.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive load against a running engine and report throughput and latency",
		Long: `bench drives keyvalue or object_storage through the SDK (retry on "no responders"
included), prints a progress line while it runs, then throughput and latency
percentiles. With --raw it first measures plain NATS request/reply with the same
concurrency and payload, twice, against an echo served as a NATS micro endpoint like
the engine's: a bare echo, and one that stamps the Abi-Engine-Instance header on every
reply (the work the protocol requires of any responder); it prints the engine's ratio
to each, so the engine's figures can be read against the broker's.`,
		Example: `  abi-engine bench --duration 10s --concurrency 16
  abi-engine bench --service object_storage --workload put-get --payload 65536 --json report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("count") {
				cfg.Duration = 0
			}
			if err := cfg.Validate(); err != nil {
				return usageError(&flagError{err})
			}
			b, err := c.brokerFor(cmd, natsURL)
			if err != nil {
				return err
			}
			nc, err := connect(b, "abi-engine bench")
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx := cmd.Context()
			var rawReports []*bench.Report
			if raw {
				// The echo answers on a connection of its own, so requests and replies
				// cross the broker between two connections as they do with an engine.
				rc, err := connect(b, "abi-engine bench echo")
				if err != nil {
					return err
				}
				defer rc.Close()
				for _, run := range []struct {
					title string
					opts  []bench.Option
				}{
					{"raw NATS request/reply:", nil},
					{"raw NATS request/reply, the reply stamped with the instance header:", []bench.Option{bench.WithInstanceHeader(benchInstance)}},
				} {
					fmt.Fprintln(c.stderr, run.title)
					opts := append([]bench.Option{bench.WithResponderConn(rc), bench.WithoutHistory(), bench.Progress(c.stderr, time.Second)}, run.opts...)
					rep, err := bench.RawNATS(ctx, nc, cfg, opts...)
					if err != nil {
						return runtimeError(err)
					}
					if err := rep.Table(c.stdout); err != nil {
						return runtimeError(err)
					}
					rawReports = append(rawReports, rep)
				}
			}
			tr, err := client.NewTransport(nc, client.WithDefaultTimeout(cfg.Timeout))
			if err != nil {
				return runtimeError(err)
			}
			fmt.Fprintf(c.stderr, "abi-engine %s %s:\n", cfg.Service, cfg.Workload)
			rep, err := bench.Run(ctx, tr, cfg, bench.WithoutHistory(), bench.Progress(c.stderr, time.Second))
			if err != nil && rep == nil {
				return runtimeError(err)
			}
			if terr := rep.Table(c.stdout); terr != nil {
				return runtimeError(terr)
			}
			for _, r := range rawReports {
				fmt.Fprintln(c.stdout, bench.Compare(r, rep))
			}
			if jsonPath != "" {
				if werr := writeJSONFile(jsonPath, rep.WriteJSON); werr != nil {
					return runtimeError(werr)
				}
			}
			if err != nil {
				return runtimeError(err)
			}
			if rep.Errors > 0 || rep.Mismatches > 0 {
				return runtimeError(fmt.Errorf("%d calls failed and %d reads did not return what was written", rep.Errors, rep.Mismatches))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&natsURL, "nats", "", "NATS URL (default: ABI_NATS_URL, else the config's nats.url, else the embedded broker's address)")
	f.StringVar(&cfg.Service, "service", cfg.Service, "keyvalue or object_storage")
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "set-get, get, set, mixed (keyvalue); put-get, get, put (object_storage)")
	f.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "workers, each with one call in flight")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run")
	f.Int64Var(&cfg.Count, "count", 0, "stop after this many operations instead of a duration")
	f.IntVar(&cfg.PayloadBytes, "payload", cfg.PayloadBytes, "bytes of every value written")
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "size of the key space")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on every call, retries included")
	f.BoolVar(&raw, "raw", false, "measure plain NATS request/reply first (a bare echo and one stamping the instance header), for comparison")
	f.StringVar(&jsonPath, "json", "", "write the JSON report to this file")
	return cmd
}

// writeJSONFile writes a report through write into path.
func writeJSONFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
