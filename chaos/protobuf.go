package chaos

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/client"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// The protobuf traffic (Options.Protobuf): keyvalue calls as the Python clients make
// them (protobuf bodies, a service token on each, the engine's answer read from the
// response message), beside the JSON traffic and on keys of their own, recorded in the
// same history, so every checker judges them as it judges the JSON calls.

// protobufKeyPrefix starts the keys of the protobuf traffic, apart from the JSON
// traffic's.
const protobufKeyPrefix = "protobuf/"

// protobufWorkers is how many workers drive the protobuf traffic: half as many as the
// JSON traffic's, at least one.
func protobufWorkers(opts Options) int { return max(1, opts.Concurrency/2) }

// secretFile writes the run's service token secret into the work directory, for the
// engines' nats.jwt_secret_file: the options' secret, or a random one when only the
// protobuf traffic or the discovery scenario needs one. "" when the run has none.
func (h *harness) secretFile() (string, error) {
	secret := h.opts.JWTSecret
	if len(secret) == 0 && (h.opts.Protobuf || h.sc.Discovery) {
		secret = []byte(crand.Text() + crand.Text())
	}
	if len(secret) == 0 {
		return "", nil
	}
	path := filepath.Join(h.work, "jwt-secret")
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		return "", fmt.Errorf("chaos: write the service token secret: %w", err)
	}
	h.secret, h.secretPath = secret, path
	return path, nil
}

// clientOptions are the options of every client of the harness: a service token on
// every call when the engines require them.
func (h *harness) clientOptions(opts ...client.Option) []client.Option {
	if len(h.secret) > 0 {
		opts = append(opts, client.WithServiceToken(h.secret, "abi-engine-chaos"))
	}
	return opts
}

// runProtobuf drives the protobuf traffic until stop closes; it returns once every
// worker has. Its workers are numbered after the JSON traffic's, so each worker's
// calls stay sequential in the history.
func runProtobuf(ctx context.Context, tr *client.Transport, opts Options, rec *bench.Recorder, stop <-chan struct{}) {
	cfg := trafficConfig(opts)
	var wg sync.WaitGroup
	for i := range protobufWorkers(opts) {
		worker := opts.Concurrency + i
		rng := rand.New(rand.NewPCG(uint64(opts.Seed), uint64(worker)+1))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				op := protobufCall(ctx, tr, cfg, rng)
				op.Worker = worker
				op.Interrupted = op.Interrupted || (op.Failed() && ctx.Err() != nil)
				rec.Record(op)
			}
		})
	}
	wg.Wait()
}

// protobufCall makes one call of the mixed keyvalue workload in protobuf: half gets, a
// quarter sets, an eighth each set_if_not_exists and delete, as the JSON traffic's.
// A missing key (KV_NOT_FOUND) is what the JSON protocol's found/deleted false is.
func protobufCall(ctx context.Context, tr *client.Transport, cfg bench.Config, rng *rand.Rand) bench.Op {
	key := fmt.Sprintf("%s%d", protobufKeyPrefix, rng.IntN(cfg.Keys))
	value := make([]byte, cfg.PayloadBytes)
	for i := range value {
		value[i] = byte(rng.UintN(256))
	}
	op := bench.Op{Key: key}
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	pctx := &commonv1.CallContext{TraceId: fmt.Sprintf("chaos-%016x", rng.Uint64()), TimeoutMs: int32(cfg.Timeout / time.Millisecond)}
	switch n := rng.IntN(8); {
	case n < 4:
		op.Kind = protocol.OpGet
		var r kvv1.GetResponse
		if protobufRoundTrip(cctx, tr, &op, &kvv1.GetRequest{Context: pctx, Key: key}, &r) {
			op.Found, op.Output = true, bench.ValueHash(r.GetValue())
		}
	case n < 6:
		op.Kind, op.Input = protocol.OpSet, bench.ValueHash(value)
		protobufRoundTrip(cctx, tr, &op, &kvv1.SetRequest{Context: pctx, Key: key, Value: value}, &kvv1.SetResponse{})
	case n == 6:
		op.Kind, op.Input = protocol.OpSetIfNotExists, bench.ValueHash(value)
		var r kvv1.SetIfNotExistsResponse
		if protobufRoundTrip(cctx, tr, &op, &kvv1.SetIfNotExistsRequest{Context: pctx, Key: key, Value: value}, &r) {
			op.Applied = r.GetOkValue()
		}
	default:
		op.Kind = protocol.OpDelete
		op.Applied = protobufRoundTrip(cctx, tr, &op, &kvv1.DeleteRequest{Context: pctx, Key: key}, &kvv1.DeleteResponse{})
	}
	op.Interrupted = op.Failed() && ctx.Err() != nil
	return op
}

// protobufRoundTrip sends req and decodes the reply into rep, filling op's times,
// instance and error. It reports a success that found the key: false for a failure and
// for KV_NOT_FOUND, which is no failure.
func protobufRoundTrip(ctx context.Context, tr *client.Transport, op *bench.Op, req, rep proto.Message) bool {
	body, err := proto.Marshal(req)
	if err != nil {
		op.Code, op.Err = protocol.InvalidArgument, err.Error()
		return false
	}
	op.Invoke = time.Now()
	defer func() { op.Complete = time.Now() }()
	reply, err := tr.Request(ctx, protocol.ServiceSubject(protocol.KeyValue, op.Kind), body, nil)
	var ce *client.CallError
	if errors.As(err, &ce) && ce.Err.Code == protocol.KVNotFound {
		op.Instance = ce.Instance
		return false
	}
	if err != nil {
		bench.Failure(op, err)
		return false
	}
	op.Instance = reply.Instance
	if err := proto.Unmarshal(reply.Data, rep); err != nil {
		// The engine answered, so the call ran; what it returned is unknown.
		op.Code, op.Indefinite = protocol.Internal, true
		op.Err = fmt.Sprintf("decode %s reply %x: %v", op.Kind, reply.Data, err)
		return false
	}
	return true
}
