package jetstreamstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/abi-engine/engine/internal/jserr"
	"github.com/nats-io/nats.go/jetstream"
)

// StoreKeyPrefix, followed by a service's name, is the key of ABI_ENGINE where the
// lease holder publishes which store that service's shared backend reaches (a
// StoreProof), beside the six-key record as the period is. A standby reads it and
// compares it with the store its own backend reaches: a backend counts as shared once
// it is shown to be the holder's store, not because its adapter could be.
const StoreKeyPrefix = "store."

// StoreProof is what a holder publishes per shared backend that can name its store.
type StoreProof struct {
	InstanceID string `json:"instance_id"` // the holder that published it
	Service    string `json:"service"`
	Backend    string `json:"backend"` // the adapter, e.g. postgres
	ID         string `json:"id"`      // the store's own id, made inside the store
	Where      string `json:"where"`   // for people: database, server, table
}

// PublishStore writes p under StoreKeyPrefix + p.Service, unconditionally: the latest
// holder's word wins, and a reader trusts only the one that names the holder.
func (s *Store) PublishStore(ctx context.Context, p StoreProof) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	key := StoreKeyPrefix + p.Service
	err = jserr.Resend(ctx, func() error {
		_, err := s.kv.Put(ctx, key, b)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstreamstore: publish %s: %w", key, err)
	}
	return nil
}

// ReadStore reads what a holder published for service; ok is false when nothing was
// (a holder of an older version, a Python engine, or one whose publish failed). A value
// that is not a StoreProof is an error naming the key.
func (s *Store) ReadStore(ctx context.Context, service string) (p StoreProof, ok bool, err error) {
	key := StoreKeyPrefix + service
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return StoreProof{}, false, nil
	case err != nil:
		return StoreProof{}, false, fmt.Errorf("jetstreamstore: read %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.InstanceID == "" || p.ID == "" {
		return StoreProof{}, false, fmt.Errorf("jetstreamstore: %s holds %.200q, not a store proof (instance_id, service, backend, id, where)", key, e.Value())
	}
	return p, true, nil
}
