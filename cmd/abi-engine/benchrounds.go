package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/protocol"
)

// benchRounds runs bench's rounds: the engine alone, or with --raw the bare echo, the
// header echo, for a write workload the direct store write (bench.RawStore), for
// keyvalue set the same write through a bare responder (bench.RawProxy), and the
// engine, in the order bench.Interleave gives each round.
type benchRounds struct {
	c        *cli
	cfg      bench.Config
	nc       *nats.Conn
	tr       *client.Transport
	echoConn *nats.Conn          // nil without --raw
	store    jetstream.JetStream // the direct store writes of --raw; nil: none (a read workload)
	proxy    jetstream.JetStream // the write proxy's, on echoConn; nil: none (not keyvalue set)
	like     string              // the engine's bucket the scratch bucket is shaped like
	rounds   int
	// out takes the tables and ratios: standard output, or standard error when the
	// JSON report goes to standard output (--json -).
	out io.Writer

	failed, mismatched int64 // the engine runs' failed calls and wrong reads
	deferred           error // a run's error that still left a report (a failed cleanup)
}

// run runs every round and prints the runs and the ratios as they come, then, over
// several rounds, the medians and ranges. It returns the last engine report.
func (b *benchRounds) run(ctx context.Context) (*bench.Report, error) {
	var last *bench.Report
	var vsEcho, vsHeader, vsStore, vsProxy, proxyVsStore []bench.Comparison
	for i := range b.rounds {
		if b.rounds > 1 {
			fmt.Fprintf(b.c.stderr, "round %d of %d:\n", i+1, b.rounds)
		}
		order := []bench.Phase{bench.PhaseEngine}
		if b.echoConn != nil {
			order = bench.Interleave(i, b.phases()...)
		}
		var echo, header, store, proxy, eng *bench.Report
		for _, phase := range order {
			rep, err := b.phase(ctx, phase)
			if err != nil {
				return nil, err
			}
			switch phase {
			case bench.PhaseEcho:
				echo = rep
			case bench.PhaseHeaderEcho:
				header = rep
			case bench.PhaseStore:
				store = rep
			case bench.PhaseProxy:
				proxy = rep
			default:
				eng = rep
			}
		}
		last = eng
		b.failed += eng.Errors
		b.mismatched += eng.Mismatches
		if echo != nil {
			vsEcho, vsHeader = append(vsEcho, bench.Compare(echo, eng)), append(vsHeader, bench.Compare(header, eng))
			fmt.Fprintln(b.out, vsEcho[i])
			fmt.Fprintln(b.out, vsHeader[i])
		}
		if store != nil {
			vsStore = append(vsStore, bench.Compare(store, eng))
			fmt.Fprintln(b.c.stdout, vsStore[i])
		}
		if proxy != nil {
			vsProxy = append(vsProxy, bench.Compare(proxy, eng))
			floor := bench.Compare(store, proxy)
			floor.Of = bench.ProxyName
			proxyVsStore = append(proxyVsStore, floor)
			fmt.Fprintln(b.c.stdout, vsProxy[i])
			fmt.Fprintln(b.c.stdout, floor)
		}
	}
	if b.rounds > 1 && len(vsEcho) > 0 {
		fmt.Fprintln(b.out, bench.SummarizeRounds(vsEcho))
		fmt.Fprintln(b.out, bench.SummarizeRounds(vsHeader))
	}
	if b.rounds > 1 && len(vsStore) > 0 {
		fmt.Fprintln(b.c.stdout, bench.SummarizeRounds(vsStore))
	}
	if b.rounds > 1 && len(vsProxy) > 0 {
		fmt.Fprintln(b.c.stdout, bench.SummarizeRounds(vsProxy))
		fmt.Fprintln(b.c.stdout, bench.SummarizeRounds(proxyVsStore))
	}
	return last, nil
}

// phases are the phases of a round with --raw, in even rounds' order.
func (b *benchRounds) phases() []bench.Phase {
	p := []bench.Phase{bench.PhaseEcho, bench.PhaseHeaderEcho}
	if b.store != nil {
		p = append(p, bench.PhaseStore)
	}
	if b.proxy != nil {
		p = append(p, bench.PhaseProxy)
	}
	return append(p, bench.PhaseEngine)
}

// phase runs one phase and prints it: its table, or over several rounds one line.
func (b *benchRounds) phase(ctx context.Context, phase bench.Phase) (*bench.Report, error) {
	opts := []bench.Option{bench.WithoutHistory(), bench.Progress(b.c.stderr, time.Second)}
	var title string
	var rep *bench.Report
	var err error
	switch phase {
	case bench.PhaseEcho, bench.PhaseHeaderEcho:
		title = "raw NATS request/reply"
		opts = append(opts, bench.WithResponderConn(b.echoConn))
		if phase == bench.PhaseHeaderEcho {
			title += ", the reply stamped with the instance header"
			opts = append(opts, bench.WithInstanceHeader(benchInstance))
		}
		fmt.Fprintln(b.c.stderr, title+":")
		if rep, err = bench.RawNATS(ctx, b.nc, b.cfg, opts...); err != nil {
			return nil, runtimeError(err)
		}
	case bench.PhaseStore:
		title = fmt.Sprintf("direct JetStream %s into a scratch bucket shaped like %s", map[bool]string{true: "KV put", false: "object put"}[b.cfg.Service == protocol.KeyValue], b.like)
		fmt.Fprintln(b.c.stderr, title+":")
		rep, err = bench.RawStore(ctx, b.store, b.cfg, b.like, opts...)
		if err != nil && rep == nil {
			return nil, runtimeError(err)
		}
		if err != nil && b.deferred == nil {
			b.deferred = err
		}
	case bench.PhaseProxy:
		title = "JetStream KV put through a bare responder (a micro endpoint that puts and replies) into a scratch bucket shaped like " + b.like
		fmt.Fprintln(b.c.stderr, title+":")
		rep, err = bench.RawProxy(ctx, b.nc, b.echoConn, b.proxy, b.cfg, b.like, opts...)
		if err != nil && rep == nil {
			return nil, runtimeError(err)
		}
		if err != nil && b.deferred == nil {
			b.deferred = err
		}
	default:
		title = fmt.Sprintf("abi-engine %s %s", b.cfg.Service, b.cfg.Workload)
		fmt.Fprintln(b.c.stderr, title+":")
		rep, err = bench.Run(ctx, b.tr, b.cfg, opts...)
		if err != nil && rep == nil {
			return nil, runtimeError(err)
		}
		if err != nil && b.deferred == nil {
			b.deferred = err
		}
	}
	if b.rounds == 1 {
		if err := rep.Table(b.out); err != nil {
			return nil, runtimeError(err)
		}
		return rep, nil
	}
	fmt.Fprintf(b.out, "%s: %.0f ops/s, p50 %s, p99 %s, %d errors\n", title, rep.Throughput,
		rep.Latency.P50.Round(time.Microsecond), rep.Latency.P99.Round(time.Microsecond), rep.Errors)
	return rep, nil
}

// failures is the command's error once every round is printed: a run's error that left
// a report, then failed calls or wrong reads of the engine runs.
func (b *benchRounds) failures() error {
	if b.deferred != nil {
		return runtimeError(b.deferred)
	}
	if b.failed > 0 || b.mismatched > 0 {
		return runtimeError(fmt.Errorf("%d calls failed and %d reads did not return what was written", b.failed, b.mismatched))
	}
	return nil
}
