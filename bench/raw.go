package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// Identity of RawNATS reports (Report.Config).
const (
	RawService  = "nats"
	RawWorkload = "echo"
	// RawHeaderWorkload is the echo that stamps the instance header (WithInstanceHeader).
	RawHeaderWorkload = "echo-instance-header"
)

// drainWait bounds the wait for the echo service's subscription to drain.
const drainWait = 5 * time.Second

// RawNATS measures plain NATS request/reply as Run measures an engine: cfg's
// Concurrency, Duration or Count, PayloadBytes, Timeout and Seed, through nc, against
// an echo on a fresh subject: an endpoint of a NATS micro service (queue group "q",
// like the engine's services), so what the comparison leaves out of the engine is only
// its own work. RawNATS adds the echo service before the run and stops it after, on nc
// or on the connection given with WithResponderConn. Every request carries a unique
// value, and a reply that does not echo it counts as a mismatch. The options are
// Run's. Service, Workload, Keys, KeyPrefix and Cleanup are ignored; the report names
// Service RawService and Workload RawWorkload (RawHeaderWorkload with
// WithInstanceHeader).
func RawNATS(ctx context.Context, nc *nats.Conn, cfg Config, opts ...Option) (*Report, error) {
	if nc == nil {
		return nil, errors.New("bench: RawNATS needs a NATS connection, got nil")
	}
	if err := cfg.validateLoad(); err != nil {
		return nil, err
	}
	o, err := buildOptions(true, opts)
	if err != nil {
		return nil, err
	}
	cfg.Service, cfg.Workload, cfg.Keys, cfg.KeyPrefix, cfg.Cleanup = RawService, RawWorkload, 0, "", false
	respond := func(r micro.Request) { _ = r.Respond(r.Data()) }
	if o.echoHeader != "" {
		cfg.Workload = RawHeaderWorkload
		header := micro.WithHeaders(micro.Headers{protocol.HeaderInstance: []string{o.echoHeader}}) // read-only, shared
		respond = func(r micro.Request) { _ = r.Respond(r.Data(), header) }
	}
	if limit := nc.MaxPayload(); limit > 0 && int64(cfg.PayloadBytes) > limit {
		return nil, fmt.Errorf("bench: payload_bytes %d is over the broker's max payload of %d bytes", cfg.PayloadBytes, limit)
	}
	rc := nc
	if o.responder != nil {
		rc = o.responder
	}
	subject := "_bench.echo." + strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix)
	stop, err := respondOn(ctx, rc, responder{service: echoService, what: "the echo", endpoint: "echo", subject: subject, handle: respond}, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	defer stop()
	rep := measure(ctx, cfg, o, func(id int, l *loop) {
		rng := workerRand(cfg.Seed, id)
		buf := filler(rng, cfg.PayloadBytes)
		var seq uint64
		for l.next() {
			seq++
			putTag(buf, uint64(id+1)<<40|seq&(1<<40-1))
			o.recorder.Record(echo(l.ctx, nc, subject, id, buf, cfg.Timeout, o.echoHeader))
		}
	})
	rep.History = o.recorder.History()
	return rep, nil
}

// Identity of the echo service: its name, and the queue group of its endpoint, the one
// micro services use by default.
const (
	echoService = "abi_bench_echo"
	echoQueue   = "q"
)

// responder is a micro service of one endpoint the bench answers requests with.
type responder struct {
	service, what     string // the micro service's name; what errors call it
	endpoint, subject string
	handle            micro.HandlerFunc
}

// respondOn adds r on rc (queue group "q", like the engine's services) and confirms
// its subscription with a broker round trip bounded by timeout: the subscription must
// reach the server before the first request, or that one finds no responders. stop
// stops it (stopEcho); on an error nothing is left running.
func respondOn(ctx context.Context, rc *nats.Conn, r responder, timeout time.Duration) (stop func(), err error) {
	before := rc.NumSubscriptions()
	svc, err := micro.AddService(rc, micro.Config{Name: r.service, Version: "1.0.0", QueueGroup: echoQueue})
	if err != nil {
		return nil, fmt.Errorf("bench: add %s service: %w", r.what, err)
	}
	stop = func() { stopEcho(svc, rc, rc.NumSubscriptions()-before) }
	if err := svc.AddEndpoint(r.endpoint, r.handle, micro.WithEndpointSubject(r.subject)); err != nil {
		stop()
		return nil, fmt.Errorf("bench: add %s endpoint on %s: %w", r.what, r.subject, err)
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	err = rc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		stop()
		return nil, fmt.Errorf("bench: flush %s service's subscriptions: %w", r.what, err)
	}
	return stop, nil
}

// stopEcho stops the echo service: Stop drains its subscriptions (they answer what
// they have received, so no request of a cancelled run is left behind), then it waits,
// bounded, until the connection holds that many fewer subscriptions (added, the
// service's): micro gives no handle on its subscriptions to wait on, and a drained one
// leaves the connection when its goroutine is done.
func stopEcho(svc micro.Service, rc *nats.Conn, added int) {
	left := rc.NumSubscriptions() - added
	if svc.Stop() != nil {
		return // a closed connection: nothing is left to answer
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(drainWait)
	for rc.NumSubscriptions() > left && time.Now().Before(deadline) {
		<-tick.C
	}
}

// echo makes one request and checks that the reply is the request, with instance in
// its instance header when instance is not "".
func echo(ctx context.Context, nc *nats.Conn, subject string, worker int, value []byte, timeout time.Duration, instance string) Op {
	op := Op{Worker: worker, Kind: KindEcho, Key: subject, Input: ValueHash(value)}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	op.Invoke = time.Now()
	m, err := nc.RequestWithContext(cctx, subject, value)
	op.Complete = time.Now()
	if err != nil {
		op.Code, op.Err, op.Indefinite = rawCode(err), err.Error(), !errors.Is(err, nats.ErrNoResponders)
		op.Interrupted = ctx.Err() != nil
		return op
	}
	op.Found, op.Output = true, ValueHash(m.Data)
	op.Mismatch = !bytes.Equal(m.Data, value)
	if instance != "" {
		// Read as a client reads it: the header block is parsed on every reply.
		op.Instance = m.Header.Get(protocol.HeaderInstance)
		op.Mismatch = op.Mismatch || op.Instance != instance
	}
	return op
}

// rawCode maps a nats.go request error to the code the client SDK would give it.
func rawCode(err error) protocol.Code {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.Canceled),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected):
		return protocol.Unavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return protocol.DeadlineExceeded
	case errors.Is(err, nats.ErrMaxPayload):
		return protocol.PayloadTooLarge
	default:
		return protocol.Internal
	}
}
