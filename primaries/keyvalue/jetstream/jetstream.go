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
package jetstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/jserr"
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
}

// Store is a keyvalue.Store on a JetStream KV bucket.
type Store struct {
	js     js.JetStream
	kv     js.KeyValue
	bucket string
	prefix string // subject prefix of the bucket's keys
	opened *jsbucket.Bucket
	fp     *failpoint.Set
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
	return &Store{js: j, kv: kv, bucket: cfg.Bucket, prefix: "$KV." + cfg.Bucket + ".", opened: b, fp: cfg.Failpoints}, nil
}

// Probe checks that the bucket exists and recreates it, empty and with the configured
// settings, when it was deleted (recreated says so). The engine probes after a call
// failed; the store's handles work on the recreated bucket.
func (s *Store) Probe(ctx context.Context) (recreated bool, err error) {
	return s.opened.Ensure(ctx)
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
// resend could apply it twice (design §5.8).
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

// ttlSeconds rounds a TTL up to the server's whole seconds.
func ttlSeconds(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1) / time.Second * time.Second
}

// Set stores value; ttl 0 means no expiry. It publishes to the key's subject itself
// because the KV API sets a TTL only on Create.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	var opts []js.PublishOpt
	if ttl > 0 {
		opts = append(opts, js.WithMsgTTL(ttlSeconds(ttl)))
	}
	err := failpoint.Resend(s.fp, func() error { // resend-unknown
		_, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: s.prefix + encode(key), Data: value}, opts...)
		return err
	})()
	if err != nil {
		return s.writeError("set", key, err)
	}
	return nil
}

// SetIfNotExists stores value only if key is absent (never set, deleted or expired).
func (s *Store) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	var opts []js.KVCreateOpt
	if ttl > 0 {
		opts = append(opts, js.KeyTTL(ttlSeconds(ttl)))
	}
	for range maxCASAttempts {
		err := jserr.Resend(ctx, failpoint.Resend(s.fp, func() error { // resend-unknown
			_, err := s.kv.Create(ctx, encode(key), value, opts...)
			return err
		}))
		switch {
		case err == nil:
			return true, nil
		case !jserr.IsConflict(err):
			return false, s.writeError("set_if_not_exists", key, err)
		}
		// A conflict means the key holds a value, or held the marker of a delete that
		// expired (markerTTL) between Create's two writes: the write over the marker
		// expects a revision that is gone. Only a live value makes it "not set".
		e, err := s.entry(ctx, key)
		if err != nil || e != nil {
			return false, err
		}
	}
	return false, protocol.Errorf(protocol.Conflict, "keyvalue set_if_not_exists %.64q: the key changed %d times while setting it", key, maxCASAttempts)
}

// Delete removes key and reports whether it had a value.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.deleteIf(ctx, "delete", key, func(js.KeyValueEntry) bool { return true })
}

// DeleteIfValueMatches removes key only if its value equals value.
func (s *Store) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.deleteIf(ctx, "delete_if_value_matches", key, func(e js.KeyValueEntry) bool {
		return bytes.Equal(e.Value(), value)
	})
}

// deleteIf reads key and, if match accepts its entry, purges exactly that revision.
// A conflict means another writer changed the key in between: read again.
func (s *Store) deleteIf(ctx context.Context, op, key string, match func(js.KeyValueEntry) bool) (bool, error) {
	for range maxCASAttempts {
		e, err := s.entry(ctx, key)
		if err != nil || e == nil || !match(e) {
			return false, err
		}
		err = jserr.Resend(ctx, failpoint.Resend(s.fp, func() error { // resend-unknown
			return s.kv.Purge(ctx, encode(key), js.LastRevision(e.Revision()), js.PurgeTTL(markerTTL))
		}))
		switch {
		case err == nil:
			return true, nil
		case !jserr.IsConflict(err):
			return false, s.writeError(op, key, err)
		}
	}
	return false, protocol.Errorf(protocol.Conflict, "keyvalue %s %.64q: the key changed %d times while deleting it", op, key, maxCASAttempts)
}

// Exists reports whether key has a value.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	e, err := s.entry(ctx, key)
	return e != nil, err
}
