// Package backends opens the keyvalue and object_storage backends a configuration
// names (memory, bbolt, postgres or jetstream; memory, fs or jetstream), each with
// what closes it.
package backends

import (
	"context"
	"fmt"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/primaries/keyvalue"
	kvbolt "github.com/abi-engine/engine/primaries/keyvalue/bbolt"
	kvjs "github.com/abi-engine/engine/primaries/keyvalue/jetstream"
	kvmem "github.com/abi-engine/engine/primaries/keyvalue/memory"
	kvpg "github.com/abi-engine/engine/primaries/keyvalue/postgres"
	"github.com/abi-engine/engine/primaries/objectstorage"
	objfs "github.com/abi-engine/engine/primaries/objectstorage/fs"
	objjs "github.com/abi-engine/engine/primaries/objectstorage/jetstream"
	objmem "github.com/abi-engine/engine/primaries/objectstorage/memory"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

func nothingToClose() error { return nil }

// KeyValue opens the configured keyvalue backend.
func KeyValue(ctx context.Context, cfg *config.Config, nc *nats.Conn, fp *failpoint.Set, log *zap.Logger) (keyvalue.Store, func() error, error) {
	kc := cfg.Services.KeyValue
	switch kc.Adapter {
	case config.KeyValueMemory:
		return kvmem.New(), nothingToClose, nil
	case config.KeyValueBolt:
		s, err := kvbolt.Open(kc.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.keyvalue (bbolt at %s): %w", kc.Path, err)
		}
		return s, s.Close, nil
	case config.KeyValueJetStream:
		js, err := jsdomain.New(nc, cfg.NATS.JetStream.Domain)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.keyvalue (jetstream): %w", err)
		}
		s, err := kvjs.New(ctx, js, kvjs.Config{Bucket: kc.Bucket, Replicas: cfg.KeyValueReplicas(), Failpoints: fp, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.keyvalue: %w", err)
		}
		return s, nothingToClose, nil
	case config.KeyValuePostgres:
		s, err := kvpg.Open(ctx, kc.DSN, kvpg.Config{Table: kc.Table, Failpoints: fp})
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.keyvalue (postgres): %w", err)
		}
		return s, func() error { s.Close(); return nil }, nil
	}
	return nil, nil, fmt.Errorf("engine: services.keyvalue.adapter %q is not known", kc.Adapter)
}

// ObjectStorage opens the configured object_storage backend.
func ObjectStorage(ctx context.Context, cfg *config.Config, nc *nats.Conn, fp *failpoint.Set, log *zap.Logger) (objectstorage.Store, func() error, error) {
	oc := cfg.Services.ObjectStorage
	switch oc.Adapter {
	case config.ObjectStorageMemory:
		return objmem.New(), nothingToClose, nil
	case config.ObjectStorageFS:
		s, err := objfs.New(oc.Root)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.object_storage (files under %s): %w", oc.Root, err)
		}
		return s, nothingToClose, nil
	case config.ObjectStorageJetStream:
		js, err := jsdomain.New(nc, cfg.NATS.JetStream.Domain)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.object_storage (jetstream): %w", err)
		}
		s, err := objjs.New(ctx, js, objjs.Config{Bucket: oc.Bucket, Replicas: cfg.ObjectStorageReplicas(), Failpoints: fp, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("engine: services.object_storage: %w", err)
		}
		return s, nothingToClose, nil
	}
	return nil, nil, fmt.Errorf("engine: services.object_storage.adapter %q is not known", oc.Adapter)
}
