package objectstorage

import (
	"context"
	"time"
)

// Metadata describes a stored object.
type Metadata struct {
	Size       int64
	ModifiedAt time.Time
}

// Store is the method set of the object_storage service. Every backend implements it,
// the ServicePrimary serves it, and the client SDK's typed client implements it too.
//
// Errors are *protocol.Error values; a missing object is protocol.ErrNotFound.
type Store interface {
	PutObject(ctx context.Context, prefix, key string, content []byte) error
	GetObject(ctx context.Context, prefix, key string) ([]byte, error)
	DeleteObject(ctx context.Context, prefix, key string) error
	ListObjects(ctx context.Context, prefix string) ([]string, error)
	GetObjectMetadata(ctx context.Context, prefix, key string) (Metadata, error)
}
