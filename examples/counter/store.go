package counter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// Memory is a Store in this process: engine.LocalData, so an engine with a rollout id
// refuses it. It keeps no epoch (nothing else can write it).
type Memory struct {
	mu sync.Mutex
	m  map[string]int64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[string]int64{}} }

// Incr implements Store.
func (s *Memory) Incr(_ context.Context, name string, by int64, _ uint64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] += by
	return s.m[name], nil
}

// Get implements Store.
func (s *Memory) Get(_ context.Context, name string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name], nil
}

// Data implements Store.
func (s *Memory) Data() engine.Data { return engine.LocalData("this process") }

// JetStream is a Store in a JetStream KV bucket on a shared broker: engine.SharedData.
// Each counter is one key holding {value, epoch}; an increment is a compare-and-set
// on the key's revision, so the epoch check and the write are one atomic step, and a
// write under an epoch older than the one the key holds is refused having changed
// nothing. Counter names are encoded, so any name is a valid key.
type JetStream struct {
	kv     jetstream.KeyValue
	bucket string
}

// record is a counter's value in the bucket.
type record struct {
	Value int64  `json:"value"`
	Epoch uint64 `json:"epoch"`
}

// OpenJetStream opens (creating it if needed) the bucket of the counters.
func OpenJetStream(ctx context.Context, js jetstream.JetStream, bucket string) (*JetStream, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("counter: open the bucket %s: %w", bucket, err)
	}
	return &JetStream{kv: kv, bucket: bucket}, nil
}

// maxConflicts bounds the compare-and-set attempts of one increment racing others.
const maxConflicts = 64

// Incr implements Store.
func (s *JetStream) Incr(ctx context.Context, name string, by int64, epoch uint64) (int64, error) {
	key := encode(name)
	for range maxConflicts {
		var rec record
		var rev uint64
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return 0, protocol.Refused("counter %q: read: %v", name, err) // a read changes nothing
		default:
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return 0, protocol.Errorf(protocol.Internal, "counter %q holds %q, not a counter: %v", name, e.Value(), err)
			}
			rev = e.Revision()
		}
		if epoch < rec.Epoch {
			return 0, errors.Join(ErrStale, protocol.Refused("counter %q was written under epoch %d, after this engine's %d: another engine serves", name, rec.Epoch, epoch))
		}
		next := record{Value: rec.Value + by, Epoch: epoch}
		body, _ := json.Marshal(next)
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, body)
		} else {
			_, err = s.kv.Update(ctx, key, body, rev)
		}
		// internal/jserr reads a JetStream write's outcome as the engine's own backends
		// do (outside this module: the same five outcomes, see its package doc).
		switch jserr.Classify(err) {
		case jserr.Committed:
			return next.Value, nil
		case jserr.Conflict, jserr.Undecided:
			continue // another write came first (or none was decided): read again
		case jserr.Refused:
			return 0, protocol.Refused("counter %q: write refused: %v", name, err)
		default:
			// The answer was lost: the write may have been applied.
			return 0, protocol.Errorf(protocol.Unavailable, "counter %q: write of unknown outcome: %v", name, err)
		}
	}
	return 0, protocol.Refused("counter %q: %d writes in a row lost the race; nothing was changed", name, maxConflicts)
}

// Get implements Store.
func (s *JetStream) Get(ctx context.Context, name string) (int64, error) {
	e, err := s.kv.Get(ctx, encode(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, protocol.Refused("counter %q: read: %v", name, err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return 0, protocol.Errorf(protocol.Internal, "counter %q holds %q, not a counter: %v", name, e.Value(), err)
	}
	return rec.Value, nil
}

// Data implements Store.
func (s *JetStream) Data() engine.Data { return engine.SharedData() }

// encode makes a key of any name: hex, which JetStream KV keys always accept.
func encode(name string) string { return fmt.Sprintf("c.%x", name) }
