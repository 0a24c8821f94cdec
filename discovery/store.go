package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/jserr"
)

// Store is where the registry's one value lives. Read returns the value and its
// revision (nil and 0 when there is none); CompareAndSwap writes data only if the value
// is still at revision (0: there is none yet), else it returns an error matching
// ErrRevisionConflict.
type Store interface {
	Read(ctx context.Context) (data []byte, revision uint64, err error)
	CompareAndSwap(ctx context.Context, data []byte, revision uint64) error
}

// ErrRevisionConflict: another writer changed the registry since it was read.
var ErrRevisionConflict = errors.New("discovery: the registry changed since it was read")

// Registry store layout, the Python service's.
const (
	bucketPrefix = "ABI_DISCOVERY_"
	registryKey  = "registry"
	// MaxSnapshotBytes bounds the registry's value (the bucket's max value size too).
	MaxSnapshotBytes = 512 * 1024
)

// Bucket is the name of the KV bucket holding project's registry.
func Bucket(project string) string { return bucketPrefix + project }

// JetStreamStore keeps the registry in the KV bucket ABI_DISCOVERY_<project>.
type JetStreamStore struct {
	nc     *nats.Conn
	kv     jetstream.KeyValue
	bucket *jsbucket.Bucket
	get    string // the stream's message-get API subject
	body   []byte // its request: the last message on the registry key
}

// BucketSpec is the bucket as the engine creates it when it is missing: history 1 and
// a 512 KiB value, as the Python engine creates it, on replicas replicas. An existing
// bucket is taken as it is, with one requirement: no max age, under which the registry
// would vanish by itself.
func BucketSpec(project string, replicas int) jsbucket.Spec {
	return jsbucket.Spec{
		What: "discovery bucket",
		KeyValue: &jetstream.KeyValueConfig{
			Bucket: Bucket(project), History: 1, MaxValueSize: MaxSnapshotBytes,
			Replicas: replicas, Storage: jetstream.FileStorage,
		},
		Require: []jsbucket.Setting{jsbucket.NoMaxAge()},
	}
}

// OpenJetStream binds project's bucket on nc, creating it when it is missing.
func OpenJetStream(ctx context.Context, nc *nats.Conn, project string, replicas int) (*JetStreamStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	b, err := jsbucket.Open(ctx, js, BucketSpec(project, replicas))
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	kv, err := js.KeyValue(ctx, b.Name())
	if err != nil {
		return nil, fmt.Errorf("discovery: bind bucket %s: %w", b.Name(), err)
	}
	body, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + b.Name() + "." + registryKey})
	return &JetStreamStore{nc: nc, kv: kv, bucket: b, get: jetstream.DefaultAPIPrefix + "STREAM.MSG.GET." + b.Stream(), body: body}, nil
}

// msgGetReply is the reply of the stream message-get API.
type msgGetReply struct {
	Message *struct {
		Seq  uint64 `json:"seq"`
		Data []byte `json:"data"`
	} `json:"message"`
	Error *struct {
		Code    int    `json:"code"`
		ErrCode int    `json:"err_code"`
		Desc    string `json:"description"`
	} `json:"error"`
}

// The API's codes for "no message found" and "stream not found".
const (
	noMessage = 10037
	noStream  = 10059
)

// gone is err after a call found the bucket deleted (by an operator, a broker that lost
// its store): the bucket is recreated, empty, once it has been gone for a moment
// (jsbucket.Ensure), so the registry works again without a restart; modules register
// again when their renewals get LEASE_EXPIRED.
func (s *JetStreamStore) gone(ctx context.Context, err error) error {
	if _, eerr := s.bucket.Ensure(ctx); eerr != nil {
		return fmt.Errorf("%w (%w)", err, eerr)
	}
	return err
}

// Read asks the stream's leader for the last message on the registry key. It sends
// the message-get request itself rather than through nats.go, which uses a direct get
// (any replica, possibly behind) whenever the stream allows them, as KV buckets do.
// A delete or purge marker reads as an empty registry at the marker's revision.
func (s *JetStreamStore) Read(ctx context.Context) ([]byte, uint64, error) {
	msg, err := s.nc.RequestWithContext(ctx, s.get, s.body)
	if err != nil {
		return nil, 0, fmt.Errorf("discovery: read %s: %w", s.bucket.Name(), err)
	}
	var r msgGetReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return nil, 0, fmt.Errorf("discovery: read %s: bad reply: %w", s.bucket.Name(), err)
	}
	switch {
	case r.Error != nil && r.Error.ErrCode == noMessage:
		return nil, 0, nil
	case r.Error != nil && r.Error.ErrCode == noStream:
		return nil, 0, s.gone(ctx, fmt.Errorf("discovery: read %s: %s", s.bucket.Name(), r.Error.Desc))
	case r.Error != nil:
		return nil, 0, fmt.Errorf("discovery: read %s: %s (code %d)", s.bucket.Name(), r.Error.Desc, r.Error.ErrCode)
	case r.Message == nil:
		return nil, 0, fmt.Errorf("discovery: read %s: a reply without a message", s.bucket.Name())
	}
	return r.Message.Data, r.Message.Seq, nil
}

// CompareAndSwap writes data at revision, as a KV update expecting the key's last
// revision; a write the leader left undecided is sent again.
func (s *JetStreamStore) CompareAndSwap(ctx context.Context, data []byte, revision uint64) error {
	err := jserr.Resend(ctx, func() error {
		_, err := s.kv.Update(ctx, registryKey, data, revision)
		return err
	})
	if jserr.IsConflict(err) {
		return fmt.Errorf("%w (revision %d): %w", ErrRevisionConflict, revision, err)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, nats.ErrNoResponders) {
		return s.gone(ctx, fmt.Errorf("discovery: write %s: %w", s.bucket.Name(), err))
	}
	if err != nil {
		return fmt.Errorf("discovery: write %s: %w", s.bucket.Name(), err)
	}
	return nil
}
