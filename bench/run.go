package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/bufpool"
	"github.com/abi-engine/engine/protocol"
)

// Run drives cfg's workload through tr and reports on it. It owns its workers and its
// progress goroutine and returns once they have ended. Workers stop issuing calls at
// cfg.Count operations, after cfg.Duration, or when StopOn's channel closes, and the
// calls in flight complete. When ctx ends, the calls in flight are cancelled and count
// as Interrupted. Every way of stopping is a normal end: Report.StoppedBy says which one
// it was.
//
// Before the run, the "get" workloads seed the key space, and a failure there is
// Run's error. After it, cfg.Cleanup deletes the key space even when ctx has ended, each
// call bounded by cfg.Timeout. Seeding and cleanup make at most 64 calls at once,
// whatever the concurrency. A write that ctx interrupted was already sent: a server
// that handles each operation on its own subscription may apply it after the cleanup's
// delete of its key, which then stays. A failed cleanup returns the report together with an
// error. The report's aggregates cover the measured run only; its History (unless
// WithoutHistory) holds the seeding and cleanup calls too, marked Setup.
//
// The report is of what the Recorder holds. A Recorder shared through WithRecorder
// with earlier runs therefore reports them too.
func Run(ctx context.Context, tr *client.Transport, cfg Config, opts ...Option) (*Report, error) {
	if tr == nil {
		return nil, errors.New("bench: Run needs a client.Transport, got nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(false, opts)
	if err != nil {
		return nil, err
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "bench-" + randomID()
	}
	d := newDriver(tr, cfg)
	d.rec, d.pad, d.keys = o.recorder, filler(workerRand(cfg.Seed, -1), cfg.PayloadBytes), keySpace(cfg.KeyPrefix, cfg.Keys)
	if err := d.checkPayload(); err != nil {
		return nil, err
	}
	if cfg.seeded() {
		d.seeds = make([]uint64, cfg.Keys)
		if err := d.phase(ctx, d.seed); err != nil {
			return nil, fmt.Errorf("bench: seeding %d keys under %q: %w", cfg.Keys, cfg.KeyPrefix, err)
		}
	}
	rep := measure(ctx, cfg, o, d.work)
	var cleanupErr error
	if cfg.Cleanup {
		// Keys left behind would stay in the engine's store for good, so cleanup runs
		// even after ctx ended; cfg.Timeout bounds each call and a failure ends it.
		if err := d.phase(context.WithoutCancel(ctx), d.remove); err != nil {
			cleanupErr = fmt.Errorf("bench: cleanup of %d keys under %q: %w", cfg.Keys, cfg.KeyPrefix, err)
		}
	}
	rep.History = o.recorder.History()
	return rep, cleanupErr
}

// driver issues the calls of one Run.
type driver struct {
	tr  *client.Transport
	cfg Config
	rec *Recorder
	// seeds holds the ValueHash of every seeded key's value (workload "get"); each
	// seeding goroutine writes its own indexes, and workers read it after seeding.
	seeds []uint64
	// pad is the filler after the tag of seeded values.
	pad []byte
	// keys names the key space (keySpace); a driver without it names keys per call.
	keys []keyName
	// bodies holds request buffers for reuse (newDriver).
	bodies *bufpool.Pool
}

// newDriver is a driver of cfg's calls through tr.
func newDriver(tr *client.Transport, cfg Config) *driver {
	return &driver{tr: tr, cfg: cfg, bodies: &bufpool.Pool{Size: requestSize, Max: maxPooledBody}}
}

// maxPooledBody is the largest request buffer kept for reuse (a set's, with its value).
const maxPooledBody = 64 << 10

// work is one worker of the measured run.
func (d *driver) work(id int, l *loop) {
	w := &worker{d: d, id: id, rng: workerRand(d.cfg.Seed, id)}
	w.buf = filler(w.rng, d.cfg.PayloadBytes)
	switch d.cfg.Workload {
	case WorkloadSetGet, WorkloadPutGet:
		w.writeRead(l)
	case WorkloadGet:
		for l.next() {
			idx := w.rng.IntN(d.cfg.Keys)
			op := d.read(l.ctx, id, idx, false)
			op.Mismatch = !op.Failed() && (!op.Found || op.Output != d.seeds[idx])
			d.rec.Record(op)
		}
	case WorkloadSet, WorkloadPut:
		for l.next() {
			d.rec.Record(d.write(l.ctx, id, w.rng.IntN(d.cfg.Keys), w.value(), false))
		}
	case WorkloadMixed:
		for l.next() {
			idx := w.rng.IntN(d.cfg.Keys)
			// Half gets, a quarter sets, an eighth each set_if_not_exists and delete: the
			// conditional writes answer with what they found, so a write applied twice
			// shows in the history.
			switch n := w.rng.IntN(8); {
			case n < 4:
				d.rec.Record(d.read(l.ctx, id, idx, false))
			case n < 6:
				d.rec.Record(d.write(l.ctx, id, idx, w.value(), false))
			case n == 6:
				d.rec.Record(d.setIfNotExists(l.ctx, id, idx, w.value()))
			default:
				d.rec.Record(d.delete(l.ctx, id, idx, false))
			}
		}
	}
}

type worker struct {
	d   *driver
	id  int
	rng *rand.Rand
	buf []byte // the value buffer: tag, then filler; reused, as a call copies it
	seq uint64
}

// value makes the worker's next value, unique in the run: the tag holds the worker
// (plus one, so it never equals a seeded value's tag) and a sequence number.
func (w *worker) value() []byte {
	w.seq++
	putTag(w.buf, uint64(w.id+1)<<40|w.seq&(1<<40-1))
	return w.buf
}

// writeRead is set-get and put-get: the worker cycles through the keys it owns (id,
// id+Concurrency, ...), writes a fresh value to each and reads it back. An odd Count
// leaves one write without its read.
func (w *worker) writeRead(l *loop) {
	d := w.d
	var owned []int
	for idx := w.id; idx < d.cfg.Keys; idx += d.cfg.Concurrency {
		owned = append(owned, idx)
	}
	states := make([]expectation, len(owned))
	for j := 0; ; j = (j + 1) % len(owned) {
		// The pair is claimed at once, so Count splits evenly into writes and reads.
		n := l.claim(2)
		if n == 0 {
			return
		}
		wr := d.write(l.ctx, w.id, owned[j], w.value(), false)
		d.rec.Record(wr)
		states[j].wrote(wr)
		if n < 2 || l.halted() {
			return
		}
		rd := d.read(l.ctx, w.id, owned[j], false)
		rd.Mismatch = !rd.Failed() && !states[j].accepts(rd)
		d.rec.Record(rd)
	}
}

// maxPossible bounds the writes of unknown outcome an expectation remembers for one
// key; past it, the key is no longer checked.
const maxPossible = 16

// expectation is what a read of a key its worker owns may return: the last
// acknowledged write, or any write whose outcome stayed unknown (it may land at any
// time). Before the first acknowledged write the key's state is unknown (left by an
// earlier run, or absent), and so it is after too many unknown outcomes.
type expectation struct {
	known     bool
	last      uint64
	possible  []uint64
	unchecked bool
}

func (e *expectation) wrote(op Op) {
	switch {
	case !op.Failed():
		e.known, e.last = true, op.Input
	case op.Indefinite:
		e.possible = append(e.possible, op.Input)
		if len(e.possible) > maxPossible {
			e.unchecked, e.possible = true, nil
		}
	}
}

func (e *expectation) accepts(read Op) bool {
	if !e.known || e.unchecked {
		return true
	}
	return read.Found && (read.Output == e.last || slices.Contains(e.possible, read.Output))
}

// setupConcurrency bounds the calls the seeding and the cleanup have in flight. They
// measure nothing, and an engine handles nats.max_concurrent_requests calls of a
// service at once (64 by default) and queues the others: at 512 requesters, 512
// deletes of 1,024 keys at once (each a read and an atomic batch on JetStream) queued
// long enough in a loaded engine for some to pass the call timeout, failing the run
// after its measurement.
const setupConcurrency = 64

// phase runs fn over the whole key space with up to Concurrency goroutines (at most
// setupConcurrency), which it waits for, and returns the first error; after one, no
// new key is started.
func (d *driver) phase(ctx context.Context, fn func(ctx context.Context, g, idx int, buf []byte) error) error {
	var (
		next   atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	for g := range min(d.cfg.Concurrency, d.cfg.Keys, setupConcurrency) {
		wg.Go(func() {
			buf := slices.Clone(d.pad)
			for !failed.Load() {
				idx := int(next.Add(1) - 1)
				if idx >= d.cfg.Keys {
					return
				}
				if err := fn(ctx, g, idx, buf); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// seed writes key idx's seeded value: tag idx, worker bits 0.
func (d *driver) seed(ctx context.Context, g, idx int, buf []byte) error {
	putTag(buf, uint64(idx))
	op := d.write(ctx, g, idx, buf, true)
	d.rec.Record(op)
	if op.Failed() {
		return fmt.Errorf("key %q: %s", op.Key, op.Err)
	}
	d.seeds[idx] = op.Input
	return nil
}

// remove deletes key idx; a missing object is fine (the run may not have reached it).
func (d *driver) remove(ctx context.Context, g, idx int, _ []byte) error {
	op := d.delete(ctx, g, idx, true)
	d.rec.Record(op)
	if op.Failed() {
		return fmt.Errorf("key %q: %s", op.Key, op.Err)
	}
	return nil
}

// key is the keyvalue key of index idx, and the Op.Key of its object: objectKey(idx)
// under the prefix cfg.KeyPrefix. The key space's strings are made once (keySpace), so
// a call spends nothing on its key that a caller with a key in hand would not.
func (d *driver) key(idx int) string {
	if idx < len(d.keys) {
		return d.keys[idx].full
	}
	return d.cfg.KeyPrefix + "/" + objectKey(idx)
}

// objectKey is the object key of index idx (under the prefix cfg.KeyPrefix).
func (d *driver) objectKey(idx int) string {
	if idx < len(d.keys) {
		return d.keys[idx].object
	}
	return objectKey(idx)
}

func objectKey(idx int) string { return strconv.Itoa(idx) }

// keyName is one key of the key space: its object key and the keyvalue key.
type keyName struct{ object, full string }

// namedKeys bounds the key space whose names are made up front (about 4 MiB of
// strings); a larger one names its keys per call.
const namedKeys = 1 << 16

// keySpace makes the names of the n keys under prefix, none if n is over namedKeys.
func keySpace(prefix string, n int) []keyName {
	if n > namedKeys {
		return nil
	}
	keys := make([]keyName, n)
	for i := range keys {
		object := objectKey(i)
		keys[i] = keyName{object: object, full: prefix + "/" + object}
	}
	return keys
}

func (d *driver) isKV() bool { return d.cfg.Service == protocol.KeyValue }

// write sets (keyvalue) or puts (object_storage) value under key idx.
func (d *driver) write(ctx context.Context, worker, idx int, value []byte, setup bool) Op {
	if d.isKV() {
		op := d.set(ctx, worker, d.key(idx), value)
		op.Setup = setup
		return op
	}
	op := Op{Worker: worker, Key: d.key(idx), Input: ValueHash(value), Setup: setup}
	op.Kind = protocol.OpPutObject
	d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.PutObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: d.cfg.KeyPrefix, Key: d.objectKey(idx), Content: value}.AppendJSON(b)
	}, nil)
	return op
}

// set sets value under the keyvalue key.
func (d *driver) set(ctx context.Context, worker int, key string, value []byte) Op {
	op := Op{Worker: worker, Key: key, Input: ValueHash(value), Kind: protocol.OpSet}
	d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVSetRequest{Ctx: protocol.CtxOf(&rc), Key: key, Value: value}.AppendJSON(b)
	}, nil)
	return op
}

// Set sets value under the keyvalue key through tr, within timeout, as a worker of Run
// does, and returns its record (worker is its Op.Worker). The chaos harness sends the
// calls of its own a scenario needs with it, so they are recorded as the traffic is.
func Set(ctx context.Context, tr *client.Transport, worker int, key string, value []byte, timeout time.Duration) Op {
	d := newDriver(tr, Config{Service: protocol.KeyValue, Timeout: timeout})
	return d.set(ctx, worker, key, value)
}

// read gets key idx. A missing object (NOT_FOUND) is Found false, not an error.
func (d *driver) read(ctx context.Context, worker, idx int, setup bool) Op {
	op := Op{Worker: worker, Key: d.key(idx), Setup: setup}
	if d.isKV() {
		op.Kind = protocol.OpGet
		var r protocol.KVGetReply
		d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
			return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: op.Key}.AppendJSON(b)
		}, &r)
		if !op.Failed() && r.Found {
			op.Found, op.Output = true, ValueHash(r.Value)
		}
		return op
	}
	op.Kind = protocol.OpGetObject
	var r protocol.GetObjectReply
	d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: d.cfg.KeyPrefix, Key: d.objectKey(idx)}.AppendJSON(b)
	}, &r)
	switch {
	case op.Code == protocol.NotFound && !op.Indefinite:
		op.Code, op.Err = "", ""
	case !op.Failed():
		op.Found, op.Output = true, ValueHash(r.Content)
	}
	return op
}

// setIfNotExists writes value under keyvalue key idx only if the key is absent.
func (d *driver) setIfNotExists(ctx context.Context, worker, idx int, value []byte) Op {
	op := Op{Worker: worker, Key: d.key(idx), Input: ValueHash(value), Kind: protocol.OpSetIfNotExists}
	var r protocol.KVSetReply
	d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVSetRequest{Ctx: protocol.CtxOf(&rc), Key: op.Key, Value: value}.AppendJSON(b)
	}, &r)
	op.Applied = !op.Failed() && r.Set
	return op
}

// delete removes key idx (the mixed workload's deletes, and the cleanup).
func (d *driver) delete(ctx context.Context, worker, idx int, setup bool) Op {
	op := Op{Worker: worker, Key: d.key(idx), Setup: setup}
	if d.isKV() {
		op.Kind = protocol.OpDelete
		var r protocol.KVDeleteReply
		d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
			return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: op.Key}.AppendJSON(b)
		}, &r)
		op.Applied = !op.Failed() && r.Deleted
		return op
	}
	op.Kind = protocol.OpDeleteObject
	d.call(ctx, &op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: d.cfg.KeyPrefix, Key: d.objectKey(idx)}.AppendJSON(b)
	}, nil)
	if op.Code == protocol.NotFound && !op.Indefinite {
		op.Code, op.Err = "", ""
	}
	return op
}

// call sends op's request, which build appends with the request's context member as
// the typed clients do, and decodes the reply into out (nil: the body is not needed).
// It fills op's times, instance and error. The times include encoding and decoding, as
// a typed client's caller sees them.
func (d *driver) call(ctx context.Context, op *Op, build func(b []byte, rc protocol.RequestContext) ([]byte, error), out any) {
	service := protocol.ObjectStorage
	if d.isKV() {
		service = protocol.KeyValue
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	op.Invoke = time.Now()
	defer func() { op.Complete = time.Now() }()
	// As a typed client builds it, in a buffer reused once Call has returned.
	buf := d.bodies.Get()
	body, err := build(*buf, requestContext(cctx))
	if err != nil {
		op.Code, op.Err = protocol.InvalidArgument, fmt.Sprintf("encode %s request for %q: %v", op.Kind, op.Key, err)
		return
	}
	// As a typed client sends it: Call asks for a parked reply where one may be needed.
	reply, err := d.tr.Call(cctx, service, op.Kind, body)
	d.bodies.Put(buf, body)
	if err != nil {
		failure(op, err)
		op.Interrupted = ctx.Err() != nil
		return
	}
	op.Instance = reply.Instance
	if out == nil {
		return
	}
	if err := protocol.DecodeReply(reply.Data, out); err != nil {
		// The engine answered, so the call ran; what it returned is unknown.
		op.Code, op.Indefinite = protocol.Internal, true
		op.Err = fmt.Sprintf("decode %s reply %.64q: %v", op.Kind, reply.Data, err)
	}
}

// Failure fills op from the error of a call made through a client.Transport (its
// Code, Err, Instance and Indefinite), as the driver records its own: a workload of
// another service records its failures with it (package chaos).
func Failure(op *Op, err error) { failure(op, err) }

// failure fills op from a Transport error.
func failure(op *Op, err error) {
	op.Err = err.Error()
	var ce *client.CallError
	if !errors.As(err, &ce) {
		op.Code, op.Indefinite = protocol.CodeOf(err), true
		return
	}
	op.Code, op.Instance, op.Indefinite = ce.Err.Code, ce.Instance, mayHaveRun(ce)
}

// mayHaveRun reports whether a failed call may still have taken effect. It certainly
// did not when nobody received it, when it never left (too large, malformed), or when
// an engine says it changed nothing: a retryable UNAVAILABLE (refused before it ran, or
// a write the backend did not apply), INVALID_ARGUMENT, NOT_FOUND, CONFLICT,
// PAYLOAD_TOO_LARGE, RESOURCE_EXHAUSTED. Every other failure is indefinite: a timeout,
// INTERNAL, DEADLINE_EXCEEDED, and an UNAVAILABLE without retryable (a lost ack, a
// commit of unknown result, a call the engine stopped while it ran).
func mayHaveRun(ce *client.CallError) bool {
	if ce.Cause != nil {
		if errors.Is(ce.Cause, nats.ErrNoResponders) {
			return false
		}
		return ce.Err.Code != protocol.PayloadTooLarge && ce.Err.Code != protocol.InvalidArgument
	}
	switch ce.Err.Code {
	case protocol.InvalidArgument, protocol.NotFound, protocol.Conflict, protocol.PayloadTooLarge, protocol.ResourceExhausted:
		return false
	case protocol.Unavailable:
		return !ce.Err.Retryable
	default:
		return true
	}
}

// checkPayload refuses a value that makes a write request larger than the broker takes
// in one message: the driver's calls never go by transfer.
func (d *driver) checkPayload() error {
	limit := d.tr.MaxPayload()
	if limit <= 0 {
		return nil
	}
	value := make([]byte, d.cfg.PayloadBytes)
	rc := &protocol.RequestContext{TimeoutMS: d.cfg.Timeout.Milliseconds()}
	var req any = protocol.KVSetRequest{Ctx: protocol.Ctx{Context: rc}, Key: d.key(d.cfg.Keys - 1), Value: value}
	kind := protocol.OpSet
	if !d.isKV() {
		kind = protocol.OpPutObject
		req = protocol.PutObjectRequest{Ctx: protocol.Ctx{Context: rc}, Prefix: d.cfg.KeyPrefix, Key: d.objectKey(d.cfg.Keys - 1), Content: value}
	}
	body, err := protocol.EncodeRequest(req)
	if err != nil {
		return fmt.Errorf("bench: encode a %s request: %w", kind, err)
	}
	msg := nats.Msg{Data: body}
	if size := int64(msg.Size()); size > limit {
		return fmt.Errorf("bench: payload_bytes %d makes a %s request of %d bytes, over the broker's max payload of %d bytes", d.cfg.PayloadBytes, kind, size, limit)
	}
	return nil
}

// requestContext is the request's "context" member (zero: none): the time left before
// ctx's deadline, as the typed clients send it.
func requestContext(ctx context.Context) protocol.RequestContext {
	deadline, ok := ctx.Deadline()
	if !ok {
		return protocol.RequestContext{}
	}
	return protocol.RequestContext{TimeoutMS: max(1, time.Until(deadline).Milliseconds())}
}

// requestSize is the first capacity of a request body, as the typed clients size it.
const requestSize = 128

// tagLen is the length of a value's tag.
const tagLen = 16

// putTag writes v as 16 lowercase hex digits at the start of b.
func putTag(b []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := tagLen - 1; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
}

// filler is n printable bytes from rng, to follow a tag.
func filler(rng *rand.Rand, n int) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return b
}

// randomID names a run's keys when the Config gives no prefix.
func randomID() string {
	var b [4]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
