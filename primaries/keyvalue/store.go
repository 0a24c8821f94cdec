package keyvalue

import (
	"context"
	"time"
)

// Store is the method set of the keyvalue service. Every backend implements it, the
// ServicePrimary serves it, and the client SDK's typed client implements it too, so a
// client-role engine hands its modules the same interface a serving engine does.
//
// Errors are *protocol.Error values (match them with errors.Is against the protocol
// sentinels). A missing key is not an error: Get and TTL report found=false.
type Store interface {
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Set stores value; ttl 0 means no expiry.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, err error)
	Delete(ctx context.Context, key string) (deleted bool, err error)
	DeleteIfValueMatches(ctx context.Context, key string, value []byte) (deleted bool, err error)
	Exists(ctx context.Context, key string) (bool, error)
	// ListKeys returns the live keys that start with prefix and sort strictly after
	// after ("" for the first page), in ascending byte order (code-point order for
	// UTF-8), at most limit of them (1..MaxListLimit); more reports that live keys
	// beyond the page exist, so the last key returned is the next page's after.
	ListKeys(ctx context.Context, prefix, after string, limit int) (keys []string, more bool, err error)
	// TTL is the time key still lives: 0 when it never expires. A missing or expired
	// key is found=false.
	TTL(ctx context.Context, key string) (ttl time.Duration, found bool, err error)
}

// SharedReader is a Store that can hand out a stored value itself instead of Get's
// copy. The bytes GetShared returns never change (a write stores a new slice), and the
// caller must only read them: the service encodes a get's reply straight from them,
// which saves copying every value it serves. The memory backend is one.
type SharedReader interface {
	GetShared(ctx context.Context, key string) (value []byte, found bool, err error)
}

// GetShared reads key from s as s.GetShared when s is a SharedReader, and as s.Get
// otherwise; the value must only be read. Wrappers of a Store use it to pass the
// shared read through.
func GetShared(ctx context.Context, s Store, key string) ([]byte, bool, error) {
	if r, ok := s.(SharedReader); ok {
		return r.GetShared(ctx, key)
	}
	return s.Get(ctx, key)
}
