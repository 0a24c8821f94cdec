package sessions

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/abi-engine/engine/protocol"
)

// NewOwnerID returns a fresh engine instance id: 32 lowercase hex characters from
// crypto/rand. A host built outside an engine takes one of its own.
func NewOwnerID() string { return randomHex() }

// ValidOwnerID reports whether id is 32 lowercase hex characters, the only form the
// owner-scoped subjects accept.
func ValidOwnerID(id string) bool { return protocol.ValidOwnerID(id) }

// NewSessionID returns a fresh session id "<owner>:<32 hex>" owned by owner.
func NewSessionID(owner string) string { return owner + ":" + randomHex() }

// ParseSessionID splits a session id into its owner and its local part; a malformed id
// is an INVALID_ARGUMENT *protocol.Error naming what was wrong.
func ParseSessionID(id string) (owner, local string, err error) {
	return protocol.ParseSessionID(id)
}

// ValidSessionID reports whether id is "<owner>:<32 hex>" with a valid owner.
func ValidSessionID(id string) bool {
	_, _, err := protocol.ParseSessionID(id)
	return err == nil
}

// OpenSubject is <prefix>.open, the queue-grouped subject new sessions are opened on.
func OpenSubject(prefix string) string { return protocol.TransferOpenSubject(prefix) }

// OwnersQueue is <prefix>.owners, the queue group of OpenSubject.
func OwnersQueue(prefix string) string { return protocol.TransferQueueGroup(prefix) }

// OwnerSubject is <prefix>.<owner>.<op>, the subject only the owning engine serves.
func OwnerSubject(prefix, owner, op string) string {
	return protocol.TransferOwnerSubject(prefix, owner, op)
}

func randomHex() string {
	var b [16]byte
	// crypto/rand.Read never fails on supported platforms (it panics instead).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
