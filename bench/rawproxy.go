package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// RawProxyWorkload names RawProxy's reports: a write proxy's KV puts.
const RawProxyWorkload = "kv-put-proxy"

// RawProxy measures the least work any NATS service in front of a JetStream KV bucket
// does for a write: an endpoint of a NATS micro service (queue group "q" and up to 64
// writes in flight, like the engine's defaults) that puts each request's value into a
// scratch bucket shaped like the engine's bucket like, with a plain KV Put from its own
// connection (rc, with j on it), and answers once the store acknowledged it. A request crosses the broker as an
// engine's set does: request, publish, acknowledgement, reply; with no epoch, no
// protocol and no decoding. Beside Run with the "set" workload and RawStore it splits
// what an engine's write costs over the store's own into what serving a write from a
// responder costs on this cluster and what the engine adds to that.
//
// cfg is Run's, keyvalue "set" only: Concurrency, Duration or Count, PayloadBytes,
// Keys, Timeout and Seed; requests go through nc. The scratch bucket is deleted after
// the run, and one that could not be is named in the error returned with the report.
// The options are Run's.
func RawProxy(ctx context.Context, nc, rc *nats.Conn, j js.JetStream, cfg Config, like string, opts ...Option) (_ *Report, err error) {
	if nc == nil || rc == nil || j == nil {
		return nil, errors.New("bench: RawProxy needs the requests' and the proxy's NATS connections and the proxy's JetStream context")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Service != protocol.KeyValue || cfg.Workload != WorkloadSet {
		return nil, fmt.Errorf("bench: RawProxy measures keyvalue set, not %s %s", cfg.Service, cfg.Workload)
	}
	o, err := buildOptions(false, opts)
	if err != nil {
		return nil, err
	}
	scratch := "ABI_BENCH_" + strings.ToUpper(randomID())
	kv, err := scratchKV(ctx, j, like, scratch)
	if err != nil {
		return nil, err
	}
	defer deleteScratch(j.DeleteKeyValue, scratch, &err)

	base := "_bench.proxy." + strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix)
	// micro calls a handler one request at a time; like the engine, the proxy keeps
	// up to proxyInFlight writes in flight, each on a goroutine of its own.
	slots := make(chan struct{}, proxyInFlight)
	var writes sync.WaitGroup
	put := func(r micro.Request) {
		slots <- struct{}{}
		writes.Go(func() {
			defer func() { <-slots }()
			key := r.Subject()[len(base)+1:]
			pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			_, perr := kv.Put(pctx, key, r.Data())
			cancel()
			if perr != nil {
				_ = r.Error("503", perr.Error(), nil)
				return
			}
			_ = r.Respond(nil)
		})
	}
	defer writes.Wait() // after the service stopped: no handler starts a write any more
	stop, err := respondOn(ctx, rc, responder{service: proxyService, what: "the write proxy", endpoint: "put", subject: base + ".*", handle: put}, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	defer stop()

	cfg.Service, cfg.Workload, cfg.Cleanup = RawService, RawProxyWorkload, false
	rep := keyedWrites(ctx, cfg, o, func(ctx context.Context, id int, key string, value []byte) Op {
		return proxyPut(ctx, nc, base, id, key, value, cfg.Timeout)
	})
	rep.History = o.recorder.History()
	return rep, nil
}

// proxyService is the write proxy's micro service name.
const proxyService = "abi_bench_proxy"

// proxyInFlight is how many writes the proxy keeps in flight: the engine's default
// nats.max_concurrent_requests.
const proxyInFlight = 64

// proxyPut makes one write through the proxy; a reply with the micro error header is
// the store's refusal.
func proxyPut(ctx context.Context, nc *nats.Conn, base string, worker int, key string, value []byte, timeout time.Duration) Op {
	op := Op{Worker: worker, Kind: protocol.OpSet, Key: key, Input: ValueHash(value)}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	op.Invoke = time.Now()
	m, err := nc.RequestWithContext(cctx, base+"."+key, value)
	op.Complete = time.Now()
	switch {
	case err != nil:
		op.Code, op.Err, op.Indefinite = rawCode(err), err.Error(), !errors.Is(err, nats.ErrNoResponders)
		op.Interrupted = ctx.Err() != nil
	case m.Header.Get(micro.ErrorHeader) != "":
		op.Code, op.Err, op.Indefinite = protocol.Unavailable, m.Header.Get(micro.ErrorHeader), true
	}
	return op
}
