package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/protocol"
)

// Identity of RawStore reports (Report.Config).
const (
	RawStoreService = "jetstream"
	// RawKVWorkload is a JetStream KV Put, RawObjectWorkload an object store Put.
	RawKVWorkload     = "direct-kv-put"
	RawObjectWorkload = "direct-object-put"
)

// scratchDeleteWait bounds the deletion of the scratch bucket after a run.
const scratchDeleteWait = 30 * time.Second

// StoreWrites reports whether cfg's workload only writes ("set" of keyvalue, "put" of
// object_storage): the workloads RawStore measures the store under.
func StoreWrites(cfg Config) bool {
	return (cfg.Service == protocol.KeyValue && cfg.Workload == WorkloadSet) ||
		(cfg.Service == protocol.ObjectStorage && cfg.Workload == WorkloadPut)
}

// RawStore measures the store an engine writes to, without the engine: a JetStream KV
// Put (keyvalue) or an object store Put (object_storage) of cfg's PayloadBytes on the
// same Concurrency, Duration or Count, Keys, Timeout and Seed as Run, through j, into a
// scratch bucket shaped like the engine's bucket like (its replicas, storage, history,
// value size and placement, and led by the server that leads it), created before the
// run and deleted after it. Beside Run with the "set" or "put" workload it says what the engine's writes cost over the
// store's own, on the cluster at hand. The options are Run's; the report names Service
// RawStoreService and Workload RawKVWorkload or RawObjectWorkload. A scratch bucket
// that could not be deleted is named in the error returned with the report.
func RawStore(ctx context.Context, j js.JetStream, cfg Config, like string, opts ...Option) (_ *Report, err error) {
	if j == nil {
		return nil, errors.New("bench: RawStore needs a JetStream context, got nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(false, opts)
	if err != nil {
		return nil, err
	}
	scratch := "ABI_BENCH_" + strings.ToUpper(randomID())
	var put func(ctx context.Context, key string, value []byte) error
	kind := protocol.OpSet
	switch cfg.Service {
	case protocol.KeyValue:
		kv, cerr := scratchKV(ctx, j, like, scratch)
		if cerr != nil {
			return nil, cerr
		}
		defer deleteScratch(j.DeleteKeyValue, scratch, &err)
		cfg.Workload = RawKVWorkload
		put = func(ctx context.Context, key string, value []byte) error {
			_, err := kv.Put(ctx, key, value)
			return err
		}
	default:
		obs, cerr := scratchObjects(ctx, j, like, scratch)
		if cerr != nil {
			return nil, cerr
		}
		defer deleteScratch(j.DeleteObjectStore, scratch, &err)
		cfg.Workload, kind = RawObjectWorkload, protocol.OpPutObject
		put = func(ctx context.Context, key string, value []byte) error {
			_, err := obs.PutBytes(ctx, key, value)
			return err
		}
	}
	cfg.Service, cfg.Cleanup = RawStoreService, false
	rep := keyedWrites(ctx, cfg, o, func(ctx context.Context, id int, key string, value []byte) Op {
		op := Op{Worker: id, Kind: kind, Key: key, Input: ValueHash(value)}
		cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		op.Invoke = time.Now()
		err := put(cctx, key, value)
		op.Complete = time.Now()
		cancel()
		if err != nil {
			op.Code, op.Err, op.Indefinite = protocol.Unavailable, err.Error(), true
			op.Interrupted = ctx.Err() != nil
		}
		return op
	})
	rep.History = o.recorder.History()
	return rep, nil
}

// keyedWrites runs cfg's writers as the raw write runs do: each worker writes its own
// filler, tagged afresh for every write, to a key drawn from cfg's Keys, and records
// the Op write returns.
func keyedWrites(ctx context.Context, cfg Config, o *options, write func(ctx context.Context, id int, key string, value []byte) Op) *Report {
	return measure(ctx, cfg, o, func(id int, l *loop) {
		rng := workerRand(cfg.Seed, id)
		buf := filler(rng, cfg.PayloadBytes)
		var seq uint64
		for l.next() {
			seq++
			putTag(buf, uint64(id+1)<<40|seq&(1<<40-1))
			o.recorder.Record(write(l.ctx, id, "k"+strconv.Itoa(rng.IntN(cfg.Keys)), buf))
		}
	})
}

// scratchKV creates the KV bucket scratch shaped like the bucket like, led by the
// server that leads like (leadLike).
func scratchKV(ctx context.Context, j js.JetStream, like, scratch string) (js.KeyValue, error) {
	st, err := j.Stream(ctx, "KV_"+like)
	if err != nil {
		return nil, fmt.Errorf("bench: read the keyvalue bucket %s to shape the scratch bucket like it: %w (name the engine's bucket with --raw-bucket)", like, err)
	}
	c := st.CachedInfo().Config
	kv, err := j.CreateKeyValue(ctx, js.KeyValueConfig{
		Bucket: scratch, History: uint8(max(c.MaxMsgsPerSubject, 1)), Replicas: c.Replicas,
		Storage: c.Storage, MaxValueSize: c.MaxMsgSize, Placement: c.Placement,
		LimitMarkerTTL: c.SubjectDeleteMarkerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: create the scratch keyvalue bucket %s: %w", scratch, err)
	}
	if err := leadLike(ctx, j, "KV_"+like, "KV_"+scratch); err != nil {
		_ = j.DeleteKeyValue(context.WithoutCancel(ctx), scratch)
		return nil, err
	}
	return kv, nil
}

// scratchObjects creates the object store scratch shaped like the object store like,
// led by the server that leads like (leadLike).
func scratchObjects(ctx context.Context, j js.JetStream, like, scratch string) (js.ObjectStore, error) {
	st, err := j.Stream(ctx, "OBJ_"+like)
	if err != nil {
		return nil, fmt.Errorf("bench: read the object store %s to shape the scratch store like it: %w (name the engine's bucket with --raw-bucket)", like, err)
	}
	c := st.CachedInfo().Config
	obs, err := j.CreateObjectStore(ctx, js.ObjectStoreConfig{
		Bucket: scratch, Replicas: c.Replicas, Storage: c.Storage, Placement: c.Placement,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: create the scratch object store %s: %w", scratch, err)
	}
	if err := leadLike(ctx, j, "OBJ_"+like, "OBJ_"+scratch); err != nil {
		_ = j.DeleteObjectStore(context.WithoutCancel(ctx), scratch)
		return nil, err
	}
	return obs, nil
}

// deleteScratch deletes the scratch bucket on a context of its own: the run's may
// have ended, and the bucket must not outlive the run.
func deleteScratch(del func(context.Context, string) error, scratch string, err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), scratchDeleteWait)
	defer cancel()
	if derr := del(ctx, scratch); derr != nil && *err == nil {
		*err = fmt.Errorf("bench: delete the scratch bucket %s after the run (delete it by hand): %w", scratch, derr)
	}
}
