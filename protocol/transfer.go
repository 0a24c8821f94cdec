package protocol

// Transfers (docs/design.md §4.2): payloads larger than one NATS message travel as a session of
// chunks. A transfer host serves one subject prefix P:
//
//	P.open               queue group P.owners   any serving engine opens the session
//	P.<owner>.write      no queue group         only the engine that owns the session
//	P.<owner>.start
//	P.<owner>.read
//	P.<owner>.close
//
// <owner> is the instance id of the engine that opened the session (32 lowercase hex) and
// a session id is "<owner>:<32 hex>", so a client routes every call after the open to
// the engine that holds the session's bytes, even while another engine already takes
// new opens during a handover. Those owner-scoped calls are never retried: "no
// responders" there means the owner is gone and the session with it.
//
// The lifecycle is open → write×N (strictly sequenced from 0) → start (once) → read×N
// (strictly sequenced from 0) → close. Start runs the operation: an upload hands the
// assembled bytes to the service (object put), a download produces the bytes the client
// then reads (object get); an operation may do both. Every reply carries the
// Abi-Engine-Instance header; errors are the Envelope of docs/design.md §4.3 with these codes:
//
//	INVALID_ARGUMENT    malformed request, unknown operation, chunk_bytes below
//	                    MinChunkBytes, metadata above MaxTransferMetadataBytes
//	NOT_FOUND           unknown, expired (idle), closed or lost session
//	CONFLICT            wrong sequence, write after start, read before start, start twice
//	PAYLOAD_TOO_LARGE   a chunk above the negotiated size, a session above its byte limit
//	RESOURCE_EXHAUSTED  too many open sessions, the host's byte budget is spent
//	UNAVAILABLE         the host is stopping (retryable: an open that ran nothing)
//	UNAUTHENTICATED     no valid service token, on an engine that verifies them
//	PERMISSION_DENIED   a session of another caller (another token's sub)
//
// The same exchanges speak protobuf (abi.transfer.v1) in sessions opened in protobuf
// (docs/protocol.md 5.5).

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Transfer operations: the last element of a transfer subject.
const (
	TransferOpen  = "open"
	TransferWrite = "write"
	TransferStart = "start"
	TransferRead  = "read"
	TransferClose = "close"
)

// Limits every transfer host and client agree on.
const (
	// MinChunkBytes is the smallest chunk a session may negotiate. A broker whose max
	// payload is below twice this cannot carry transfers at all.
	MinChunkBytes = 1024
	// MaxTransferMetadataBytes bounds an open request's metadata.
	MaxTransferMetadataBytes = 16 << 10
)

// OverflowPrefix is the transfer prefix of the overflow host that parks replies too
// large for one message (see OverflowEnvelope).
const OverflowPrefix = "abi.rpc.overflow"

// OverflowReplyOperation is the operation of a parked reply's session. It is created by
// the engine, never opened by a client.
const OverflowReplyOperation = "reply"

// Overflow headers.
const (
	// HeaderOverflow on a request says the caller can fetch a parked reply: value "1".
	// Without it a reply above the broker's max payload is PAYLOAD_TOO_LARGE.
	HeaderOverflow = "Abi-Overflow"
	// HeaderOverflowReply on a reply carries the session id of the parked reply.
	HeaderOverflowReply = "Abi-Overflow-Reply"
	// HeaderOverflowSize on a reply carries the parked reply's size in bytes (decimal).
	HeaderOverflowSize = "Abi-Overflow-Size"
)

// ReplyMayOverflow reports whether a reply of service's operation op can be too large
// for one message, so that a caller able to fetch a parked reply says so on the request
// (HeaderOverflow). The kernel's other operations answer a few members of bounded size
// ({}, {set}, {deleted}, {exists}, a TTL, an object's size and time) or an error, which always
// fit: a header on them costs every call its encoding and decoding and buys nothing.
// An embedder's service may answer anything.
func ReplyMayOverflow(service, op string) bool {
	switch service {
	case KeyValue:
		return op == OpGet || op == OpListKeys
	case ObjectStorage:
		return op == OpGetObject || op == OpListObjects || op == OpListObjectsRecursive
	}
	return true
}

// TransferOpenRequest opens a session on P.open.
type TransferOpenRequest struct {
	Ctx
	// Operation is one the host serves, e.g. "put" or "get" for object storage.
	Operation string `json:"operation"`
	// Metadata is the operation's own JSON object (for object storage, the object's
	// prefix and key). At most MaxTransferMetadataBytes.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// ChunkBytes is the largest chunk the client wants to send or receive; 0 takes the
	// host's size. The host answers with min(ChunkBytes, its own size); below
	// MinChunkBytes is INVALID_ARGUMENT.
	ChunkBytes int `json:"chunk_bytes,omitempty"`
	// Size optionally announces the upload's total size, so a session that could never
	// fit is refused at the open (PAYLOAD_TOO_LARGE) rather than halfway.
	Size int64 `json:"size,omitempty"`
}

// TransferOpenReply names the new session and the negotiated chunk size: every write's
// data and every read's data is at most ChunkBytes long.
type TransferOpenReply struct {
	ID         string `json:"id"`
	ChunkBytes int    `json:"chunk_bytes"`
}

// TransferWriteRequest appends one chunk to an upload, on P.<owner>.write. Sequence
// starts at 0 and grows by one per write; any other value is CONFLICT.
type TransferWriteRequest struct {
	Ctx
	ID       string `json:"id"`
	Sequence uint64 `json:"sequence"`
	Data     []byte `json:"data"`
}

// TransferWriteReply reports how many bytes the session holds so far.
type TransferWriteReply struct {
	Size int64 `json:"size"`
}

// TransferStartRequest runs the session's operation, on P.<owner>.start. It is answered
// once the operation has finished; the context's timeout_ms bounds it.
type TransferStartRequest struct {
	Ctx
	ID string `json:"id"`
}

// TransferStartReply reports the size of what the session now serves to reads (0 for a
// pure upload).
type TransferStartReply struct {
	Size int64 `json:"size"`
}

// TransferReadRequest fetches one chunk of the result, on P.<owner>.read. Sequence
// starts at 0 and grows by one per read; any other value is CONFLICT.
type TransferReadRequest struct {
	Ctx
	ID       string `json:"id"`
	Sequence uint64 `json:"sequence"`
}

// TransferReadReply is one chunk. Done marks the last one (an empty result is one empty
// chunk with Done set); reading past it is CONFLICT.
type TransferReadReply struct {
	Data     []byte `json:"data"`
	Sequence uint64 `json:"sequence"`
	Done     bool   `json:"done"`
}

// TransferCloseRequest ends a session on P.<owner>.close and frees its bytes. Closing
// an unknown or already closed session succeeds, so a close can always be sent. The
// reply is Empty.
type TransferCloseRequest struct {
	Ctx
	ID string `json:"id"`
}

// OverflowEnvelope is the body of a reply whose real body was too large for one message
// and was parked. The reply also carries the headers HeaderOverflowReply (= ID) and
// HeaderOverflowSize (= Size), the Abi-Engine-Instance header, and any header the real
// reply had. The caller fetches the real body from the parked session: reads on
// OverflowPrefix.<owner>.read from sequence 0 until Done, concatenating Data, checks the
// total equals Size, then closes it on OverflowPrefix.<owner>.close (a parked reply that
// is never closed idle-expires like any session). The session is already started, so
// write and start are CONFLICT.
//
// A caller only gets this when its request carried HeaderOverflow: "1". Otherwise a
// reply above the broker's max payload is answered PAYLOAD_TOO_LARGE; the operation may
// already have completed, so it must not be replayed automatically.
type OverflowEnvelope struct {
	Overflow *OverflowRef `json:"overflow"`
}

// OverflowRef locates a parked reply.
type OverflowRef struct {
	ID         string `json:"id"`
	Size       int64  `json:"size"`
	Prefix     string `json:"prefix"`
	ChunkBytes int    `json:"chunk_bytes"`
}

// ValidOwnerID reports whether id is an engine instance id as transfer subjects use it:
// exactly 32 lowercase hexadecimal characters.
func ValidOwnerID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseSessionID splits a session id "<owner>:<32 hex>" into its owner and its local
// part. A malformed id is an INVALID_ARGUMENT error naming it.
func ParseSessionID(id string) (owner, local string, err error) {
	owner, local, ok := strings.Cut(id, ":")
	if !ok {
		return "", "", Errorf(InvalidArgument, "transfer session id %q has no owner: want <owner>:<32 hex>", id)
	}
	if !ValidOwnerID(owner) {
		return "", "", Errorf(InvalidArgument, "transfer session id %q: owner %q is not 32 lowercase hex characters", id, owner)
	}
	if !ValidOwnerID(local) {
		return "", "", Errorf(InvalidArgument, "transfer session id %q: %q after the owner is not 32 lowercase hex characters", id, local)
	}
	return owner, local, nil
}

// TransferOpenSubject is P.open, where any serving engine takes new sessions.
func TransferOpenSubject(prefix string) string { return prefix + "." + TransferOpen }

// TransferQueueGroup is P.owners, the queue group of P.open.
func TransferQueueGroup(prefix string) string { return prefix + ".owners" }

// TransferOwnerSubject is P.<owner>.<op>, served only by the engine owner.
func TransferOwnerSubject(prefix, owner, op string) string {
	return prefix + "." + owner + "." + op
}

// TransferSessionSubject is the subject of operation op on session id: the owner-scoped
// subject of the engine that owns it.
func TransferSessionSubject(prefix, id, op string) (string, error) {
	owner, _, err := ParseSessionID(id)
	if err != nil {
		return "", err
	}
	return TransferOwnerSubject(prefix, owner, op), nil
}

// OverflowFromHeaders reads a parked reply's session id and size from a reply's
// headers. ok is false when the reply was not parked.
func OverflowFromHeaders(get func(key string) string) (id string, size int64, ok bool, err error) {
	id = get(HeaderOverflowReply)
	if id == "" {
		return "", 0, false, nil
	}
	size, err = strconv.ParseInt(get(HeaderOverflowSize), 10, 64)
	if err != nil || size < 0 {
		return "", 0, true, Errorf(InvalidArgument, "parked reply %s has %s %q, want a byte count", id, HeaderOverflowSize, get(HeaderOverflowSize))
	}
	return id, size, true, nil
}
