package objectstorage

import (
	"context"

	"github.com/abi-engine/engine/protocol"
)

// Metadata describes a stored object. It is protocol's type, so the client SDK's
// typed client has the same method set without importing this package.
type Metadata = protocol.ObjectMetadata

// Store is the method set of the object_storage service. Every backend implements it,
// the ServicePrimary serves it, and the client SDK's typed client implements it too.
//
// Errors are *protocol.Error values; a missing object is protocol.ErrNotFound.
type Store interface {
	PutObject(ctx context.Context, prefix, key string, content []byte) error
	GetObject(ctx context.Context, prefix, key string) ([]byte, error)
	DeleteObject(ctx context.Context, prefix, key string) error
	// ListObjects returns the keys of the objects directly under prefix, sorted.
	ListObjects(ctx context.Context, prefix string) ([]string, error)
	// ListObjectsRecursive returns every object under prefix at any depth, sorted, each
	// named relative to prefix: "k" for prefix/k, "a/b/k" for prefix/a/b/k.
	ListObjectsRecursive(ctx context.Context, prefix string) ([]string, error)
	GetObjectMetadata(ctx context.Context, prefix, key string) (Metadata, error)
}
