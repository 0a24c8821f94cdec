package main

import (
	"cmp"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/protocol"
)

// benchInstance is the instance id the header-stamping echo of --raw stamps: 32 hex
// digits, as long as an engine's.
const benchInstance = "0123456789abcdef0123456789abcdef"

func (c *cli) benchCommand() *cobra.Command {
	var conn connFlags
	var jsonPath, rawBucket string
	var raw bool
	var tokens tokenFlags
	rounds := 1
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
to each, so the engine's figures can be read against the broker's. With --raw and a
write workload (keyvalue set, object_storage put) it also measures the store alone: a
JetStream KV put (object put) of the same payload, keys and concurrency, from this
process, into a scratch bucket shaped like the engine's (--raw-bucket: its replicas,
storage, history, value size, placement, and its leader on a cluster), deleted after
the run; the ratio to it is what the engine's writes cost over the store's own on this
cluster. For keyvalue set it also measures the same put through a bare responder (a
micro endpoint that puts and replies, 64 writes in flight): engine/proxy is what the
engine adds to serving a write, proxy/direct what any responder pays on this cluster.
With --rounds N the runs are repeated N times, interleaved (each round reverses the order of the one
before), and the medians and ranges of the ratios are printed last: on a shared
machine one pair of runs can differ by more than what it is meant to show.

Against engines that require service tokens (nats.jwt_secret_file), bench signs them
as call does: --jwt-secret-file, else ABI_JWT_SECRET_FILE, else the configuration's.`,
		Example: `  abi-engine bench --duration 10s --concurrency 16
  abi-engine bench --raw --workload get --rounds 5 --duration 3s --concurrency 128
  abi-engine bench --raw --workload set --payload 64 --rounds 5 --duration 3s --concurrency 16
  abi-engine bench --raw --service object_storage --workload put --payload 65536 --rounds 5 --duration 3s
  abi-engine bench --service object_storage --workload put-get --payload 65536 --json report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("count") {
				cfg.Duration = 0
			}
			if err := cfg.Validate(); err != nil {
				return usageError(&flagError{err})
			}
			if rounds < 1 {
				return usageError(&flagError{fmt.Errorf("--rounds %d must be at least 1", rounds)})
			}
			br, err := c.brokerFor(cmd, &conn)
			if err != nil {
				return err
			}
			nc, err := connect(br, "abi-engine bench")
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx := cmd.Context()
			signed, err := tokens.options(br)
			if err != nil {
				return err
			}
			tr, err := client.NewTransport(nc, append([]client.Option{client.WithDefaultTimeout(cfg.Timeout)}, signed...)...)
			if err != nil {
				return runtimeError(err)
			}
			b := benchRounds{c: c, cfg: cfg, nc: nc, tr: tr, rounds: rounds, out: c.stdout}
			if jsonPath == "-" {
				b.out = c.stderr
			}
			if raw {
				// The echo answers on a connection of its own, so requests and replies
				// cross the broker between two connections as they do with an engine.
				rc, err := connect(br, "abi-engine bench echo")
				if err != nil {
					return err
				}
				defer rc.Close()
				b.echoConn = rc
				if bench.StoreWrites(cfg) {
					if b.store, err = jsdomain.New(nc, br.Domain); err != nil {
						return runtimeError(err)
					}
					if cfg.Service == protocol.KeyValue {
						if b.proxy, err = jsdomain.New(rc, br.Domain); err != nil {
							return runtimeError(err)
						}
					}
					b.like = cmp.Or(rawBucket, map[bool]string{true: config.DefaultKeyValueBucket, false: config.DefaultObjectStorageBucket}[cfg.Service == protocol.KeyValue])
				}
			}
			last, err := b.run(ctx)
			if err != nil {
				return err
			}
			switch jsonPath {
			case "":
			case "-":
				if werr := last.WriteJSON(c.stdout); werr != nil {
					return runtimeError(werr)
				}
			default:
				if werr := writeJSONFile(jsonPath, last.WriteJSON); werr != nil {
					return runtimeError(werr)
				}
			}
			return b.failures()
		},
	}
	f := cmd.Flags()
	conn.add(cmd)
	f.StringVar(&cfg.Service, "service", cfg.Service, "keyvalue or object_storage")
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "set-get, get, set, mixed (keyvalue); put-get, get, put (object_storage)")
	f.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "workers, each with one call in flight")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run")
	f.Int64Var(&cfg.Count, "count", 0, "stop after this many operations instead of a duration")
	f.IntVar(&cfg.PayloadBytes, "payload", cfg.PayloadBytes, "bytes of every value written")
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "size of the key space")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on every call, retries included")
	f.BoolVar(&raw, "raw", false, "measure plain NATS request/reply first (a bare echo and one stamping the instance header), for comparison")
	f.StringVar(&rawBucket, "raw-bucket", "", "with --raw and a write workload, the engine's bucket the scratch bucket is shaped like (default ABI_KV, or ABI_OBJECTS for object_storage)")
	f.IntVar(&rounds, "rounds", rounds, "repeat the runs this many times, interleaved, and print the medians and ranges of the ratios (with --raw)")
	tokens.add(cmd, "abi-engine-bench")
	f.StringVar(&jsonPath, "json", "", "write the JSON report of the engine run (the last one, with --rounds) to this file; - prints it on standard output, the tables then on standard error")
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
