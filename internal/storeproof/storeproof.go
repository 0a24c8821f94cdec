// Package storeproof proves that a standby's shared backends reach the lease holder's
// stores. An adapter that could be shared (PostgreSQL, a JetStream bucket) is not
// shared by itself: two engines given two databases would hand over "successfully",
// and every key written before the handover would then read as not found. So the
// holder publishes, per service, the id of the store its backend reaches (in the lease
// bucket, key store.<service>; WithProof), and a standby compares it with its own
// before it stands by, refusing to when they differ (Prove).
package storeproof

import (
	"context"
	"fmt"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries"
	kvpg "github.com/abi-engine/engine/primaries/keyvalue/postgres"
	"github.com/abi-engine/engine/protocol"
	"go.uber.org/zap"
)

// publishBound bounds a holder's publication of its store ids, which never holds up
// serving: a failed one is logged and written again at the next adoption.
const publishBound = 2 * time.Second

// Mismatch is a standby refused because a shared backend of its does not reach the
// store the serving engine's does (the root package's *StoreMismatchError).
type Mismatch struct {
	Service string
	Holder  lease.Holder
	Theirs  jetstreamstore.StoreProof // what the holder published
	Ours    ID                        // what this engine's backend reaches (ID empty: none that can be named)
}

// ID names the store a backend reaches.
type ID struct {
	Backend   string // the adapter
	ID, Where string
}

// Identity is how a service's backend names its store; nil when it cannot (a local
// backend, which a rollout refuses anyway).
type Identity func(ctx context.Context) (ID, error)

// pgIdentity is the keyvalue PostgreSQL backend's: a random id made in the database.
type pgIdentity interface {
	Identity(ctx context.Context) (kvpg.Identity, error)
}

// Identities is, per kernel service, how its backend names its store (kv is the
// opened keyvalue backend). A JetStream bucket is named by its name and its JetStream
// domain: every engine that sees the lease reaches the same account's JetStream, so
// the same name in the same domain is the same bucket.
func Identities(cfg *config.Config, kv any) map[string]Identity {
	ids := map[string]Identity{}
	kc, oc := cfg.Services.KeyValue, cfg.Services.ObjectStorage
	in := ""
	if d := cfg.NATS.JetStream.Domain; d != "" {
		in = " in domain " + d
	}
	switch {
	case kc.Adapter == config.KeyValueJetStream:
		ids[protocol.KeyValue] = fixedID(string(kc.Adapter), "bucket "+kc.Bucket+in, "JetStream bucket "+kc.Bucket+in)
	case kv != nil:
		if pg, ok := kv.(pgIdentity); ok {
			ids[protocol.KeyValue] = func(ctx context.Context) (ID, error) {
				id, err := pg.Identity(ctx)
				return ID{Backend: string(kc.Adapter), ID: id.ID, Where: id.Where}, err
			}
		}
	}
	if oc.Adapter == config.ObjectStorageJetStream {
		ids[protocol.ObjectStorage] = fixedID(string(oc.Adapter), "bucket "+oc.Bucket+in, "JetStream object store "+oc.Bucket+in)
	}
	return ids
}

func fixedID(backend, id, where string) Identity {
	return func(context.Context) (ID, error) { return ID{Backend: backend, ID: id, Where: where}, nil }
}

// adapterOf is the configured adapter of a kernel service.
func adapterOf(cfg *config.Config, service string) string {
	if service == protocol.KeyValue {
		return string(cfg.Services.KeyValue.Adapter)
	}
	return string(cfg.Services.ObjectStorage.Adapter)
}

// Store is the lease bucket's part that holds the published store ids.
type Store interface {
	PublishStore(ctx context.Context, p jetstreamstore.StoreProof) error
	ReadStore(ctx context.Context, service string) (jetstreamstore.StoreProof, bool, error)
}

// provenFence is a shared backend's epoch fence that, once the engine's epoch is
// adopted in the store (the engine is about to serve on it), publishes the store's id
// for standbys to compare.
type provenFence struct {
	primaries.EpochFence
	publish func(ctx context.Context)
}

// AdoptEpoch implements primaries.EpochFence.
func (f provenFence) AdoptEpoch(ctx context.Context, n uint64) error {
	if err := f.EpochFence.AdoptEpoch(ctx, n); err != nil {
		return err
	}
	f.publish(ctx)
	return nil
}

// WithProof wraps fence so that each adoption publishes in store the id of service's
// store, as the engine me's; fence is returned as it is when there is nothing to
// publish.
func WithProof(fence primaries.EpochFence, service, me string, id Identity, store Store, log *zap.Logger) primaries.EpochFence {
	if fence == nil || id == nil || store == nil {
		return fence
	}
	return provenFence{EpochFence: fence, publish: func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, publishBound)
		defer cancel()
		s, err := id(ctx)
		if err == nil {
			err = store.PublishStore(ctx, jetstreamstore.StoreProof{
				InstanceID: me, Service: service, Backend: s.Backend, ID: s.ID, Where: s.Where,
			})
		}
		if err != nil {
			log.Warn("could not publish the id of a shared store for standbys to check; published again at the next adoption",
				zap.String("service", service), zap.Error(err))
		}
	}}
}

// Prove is a standby's check, before it stands by: for each kernel service whose
// store the holder published in store, this engine's backend (ids) must reach the same
// store; a *Mismatch when one does not. A holder that published nothing for a service
// (an older engine, a Python engine, a failed publish) cannot be checked: logged, not
// refused.
func Prove(ctx context.Context, store Store, holder lease.Holder, ids map[string]Identity, cfg *config.Config, log *zap.Logger) (*Mismatch, error) {
	for _, service := range []string{protocol.KeyValue, protocol.ObjectStorage} {
		theirs, ok, err := store.ReadStore(ctx, service)
		if err != nil {
			return nil, fmt.Errorf("engine: checking that services.%s reaches the serving engine's store: %w", service, err)
		}
		if !ok || theirs.InstanceID != holder.InstanceID {
			if adapterOf(cfg, service) == string(config.KeyValuePostgres) {
				log.Warn("the serving engine published no id of its store: this standby cannot prove it reaches the same one",
					zap.String("service", service), zap.String("holder", holder.String()))
			}
			continue
		}
		ours := ID{Backend: adapterOf(cfg, service)}
		if id := ids[service]; id != nil {
			if ours, err = id(ctx); err != nil {
				return nil, fmt.Errorf("engine: checking that services.%s reaches the serving engine's store: %w", service, err)
			}
		}
		if ours.Backend != theirs.Backend || ours.ID != theirs.ID {
			return &Mismatch{Service: service, Holder: holder, Theirs: theirs, Ours: ours}, nil
		}
		log.Info("this standby reaches the serving engine's store", zap.String("service", service),
			zap.String("backend", ours.Backend), zap.String("store", ours.Where))
	}
	return nil, nil
}
