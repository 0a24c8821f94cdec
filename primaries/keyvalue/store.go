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
// sentinels). A missing key is not an error: Get reports found=false.
type Store interface {
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Set stores value; ttl 0 means no expiry.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, err error)
	Delete(ctx context.Context, key string) (deleted bool, err error)
	DeleteIfValueMatches(ctx context.Context, key string, value []byte) (deleted bool, err error)
	Exists(ctx context.Context, key string) (bool, error)
}
