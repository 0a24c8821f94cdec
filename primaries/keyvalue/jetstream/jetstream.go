// Package jetstream is the keyvalue backend on a JetStream KV bucket, shared by every
// engine on the account.
//
// JetStream keys have a narrow alphabet, so each key is stored under its unpadded
// base64url encoding; callers never see it. TTLs are per-message TTLs (the bucket is
// created with LimitMarkerTTL, which enables them) rounded up to whole seconds, the
// server's granularity; the server expires keys on its own schedule. Conditional writes
// are compare-and-set on the key's revision; package jserr reads their outcome, so a
// write a replicated bucket left undecided (10164) is sent again, never read as a
// conflict.
//
// The bucket keeps its epoch (package internal/epoch) under the keys abi.epoch and
// abi.epoch.<N> (package jsepoch), which no encoded user key can be (base64url has no
// dot). Every write carries the epoch this backend adopted (AdoptEpoch) and the server
// refuses it at the commit once the bucket moved on to another. A set is one message with the epoch check; the writes
// that also check the key's own revision (set_if_not_exists, delete,
// delete_if_value_matches) are an atomic batch of the key's message and a message to
// abi.fence that carries the epoch check, stored both or neither. A refused write
// stored nothing: it is answered UNAVAILABLE, retryable, and matches epoch.ErrFenced
// when the bucket holds a newer epoch.
package jetstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/primaries/internal/jsread"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// DefaultBucket is the bucket a Config without one uses.
const DefaultBucket = "ABI_KV"

// markerTTL is how long the bucket keeps the markers of expired and deleted keys. Only
// watchers read markers and this service runs none, so the shortest TTL the server
// accepts will do.
const markerTTL = time.Second

// maxCASAttempts bounds the read-then-compare-and-delete loops under contention.
const maxCASAttempts = 100

// Config names the bucket and how it is kept.
type Config struct {
	// Bucket is the KV bucket; empty means DefaultBucket.
	Bucket string
	// Replicas is the bucket's replication factor; 0 means 1.
	Replicas int
	// Storage is where the server keeps the bucket; the zero value is file storage.
	Storage js.StorageType
	// Failpoints hosts resend-unknown (package failpoint); nil: none.
	Failpoints *failpoint.Set
	// Logger sees the repairs of the bucket's epoch record (deleted or rewritten from
	// outside); nil: none.
	Logger *zap.Logger
}

// The keys the engine keeps in the bucket besides the users' (which are base64url,
// without dots).
const (
	epochKey = "abi.epoch" // the epoch record, and abi.epoch.<N> its checks (jsepoch)
	fenceKey = "abi.fence" // the epoch-checked half of the two-check writes
)

// Store is a keyvalue.Store on a JetStream KV bucket.
type Store struct {
	js     js.JetStream
	kv     js.KeyValue
	stream js.Stream // for the last message of a key, markers included
	bucket string
	prefix string // subject prefix of the bucket's keys
	opened *jsbucket.Bucket

	fence *jsepoch.Fence
	// publishBatch sends an atomic batch; tests replace it.
	publishBatch func(ctx context.Context, msgs []*nats.Msg) error
	fp           *failpoint.Set
}

var _ keyvalue.Store = (*Store)(nil)

// New creates the bucket if it does not exist and returns a store on it. An existing
// bucket keeps its configuration (another engine may be using it), except that reads are
// always answered by the stream leader (package jsread says why).
func New(ctx context.Context, j js.JetStream, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	b, err := jsbucket.Open(ctx, j, jsbucket.Spec{
		What: "keyvalue bucket",
		KeyValue: &js.KeyValueConfig{
			Bucket:         cfg.Bucket,
			Description:    "abi-engine keyvalue service",
			History:        1,
			Replicas:       cfg.Replicas,
			Storage:        cfg.Storage,
			LimitMarkerTTL: markerTTL,
		},
		// A bucket that can lose keys by itself (recreated from outside with memory
		// storage, a TTL, more history) is refused, here and whenever it is checked
		// again (Probe, AdoptEpoch).
		Require: jsbucket.DataSettings(cfg.Storage, 1),
		// The two-check writes are atomic batches.
		Stream: []jsbucket.StreamSetting{jsbucket.AtomicPublish()},
		// A handle bound after this keeps reading from the leader, on a recreated
		// bucket too.
		Prepare: jsread.LeaderOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("keyvalue jetstream: %w", err)
	}
	kv, err := j.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("keyvalue jetstream: bucket %s: %w", cfg.Bucket, err)
	}
	prefix := "$KV." + cfg.Bucket + "."
	record, err := jsepoch.New(ctx, j, b.Stream(), prefix+epochKey)
	if err != nil {
		return nil, fmt.Errorf("keyvalue jetstream: bucket %s: %w", cfg.Bucket, err)
	}
	record.OnRepair(jsepoch.LogRepair(cfg.Logger, "keyvalue", cfg.Bucket))
	s := &Store{js: j, kv: kv, stream: record.Stream(), bucket: cfg.Bucket, prefix: prefix, opened: b,
		fence: jsepoch.NewFence(record, "JetStream bucket "+cfg.Bucket), fp: cfg.Failpoints}
	s.publishBatch = s.sendBatch
	return s, nil
}

// Probe checks that the bucket exists and recreates it, empty and with the configured
// settings, when it was deleted (recreated says so); then, when the bucket lost its
// epoch record (recreated, by this engine or another), it adopts the epoch it holds
// again (epoch.Held.Restore), so its writes commit once more. The engine probes after
// a call failed; the store's handles work on the recreated bucket.
func (s *Store) Probe(ctx context.Context) (recreated bool, err error) {
	if recreated, err = s.opened.Ensure(ctx); err != nil {
		return recreated, err
	}
	if _, err := s.fence.Restore(ctx); err != nil {
		return recreated, fmt.Errorf("keyvalue jetstream: %w", err)
	}
	return recreated, nil
}

// LocalStorage is empty: the bucket is on the NATS servers, which every engine reaches.
// (An engine that hosts the embedded broker keeps it on this host; the configuration
// says so, not the store.)
func (s *Store) LocalStorage() string { return "" }

// encode maps a key to the JetStream key alphabet.
func encode(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// readError turns a failed read into a protocol error. A read stores nothing, so
// resending it is safe: UNAVAILABLE, retryable. Context errors go to the primary, which
// knows whether its run was stopped.
func (s *Store) readError(op, key string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return protocol.Refused("keyvalue %s %.64q: JetStream bucket %s: %v; the read changed nothing", op, key, s.bucket, err)
}

// writeError turns a failed write into a protocol error; jserr says whether the write
// may have been stored. Surely not (the server refused it, or judged nothing):
// UNAVAILABLE, retryable. Perhaps (the ack was lost): UNAVAILABLE, not retryable, as a
// resend could apply it twice (docs/design.md §5.8).
func (s *Store) writeError(op, key string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, nats.ErrMaxPayload):
		return protocol.Errorf(protocol.PayloadTooLarge, "keyvalue %s %.64q: the value exceeds the broker's max payload", op, key)
	case jserr.Classify(err).NotStored():
		return protocol.Refused("keyvalue %s %.64q: JetStream bucket %s refused the write, so it stored nothing: %v", op, key, s.bucket, err)
	default:
		return protocol.Errorf(protocol.Unavailable, "keyvalue %s %.64q: JetStream bucket %s: %v; the write may have been stored, so do not resend it blindly", op, key, s.bucket, err)
	}
}

// entry reads the live entry of key, nil when absent.
func (s *Store) entry(ctx context.Context, key string) (js.KeyValueEntry, error) {
	e, err := s.kv.Get(ctx, encode(key))
	if errors.Is(err, js.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.readError("get", key, err)
	}
	return e, nil
}

// Get returns the value of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return nil, false, err
	}
	e, err := s.entry(ctx, key)
	if err != nil || e == nil {
		return nil, false, err
	}
	v := e.Value()
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// Exists reports whether key has a value.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	e, err := s.entry(ctx, key)
	return e != nil, err
}
