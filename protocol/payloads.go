package protocol

import "time"

// Request and reply bodies of the kernel services (docs/design.md §4.3). Byte values are
// []byte, which encoding/json writes as base64 strings, as the design requires. Every
// request embeds Ctx for the optional "context" member.

// Service names and operations.
const (
	KeyValue      = "keyvalue"
	ObjectStorage = "object_storage"

	OpGet                  = "get"
	OpSet                  = "set"
	OpSetIfNotExists       = "set_if_not_exists"
	OpDelete               = "delete"
	OpDeleteIfValueMatches = "delete_if_value_matches"
	OpExists               = "exists"
	OpListKeys             = "list_keys"
	OpGetTTL               = "get_ttl"

	OpPutObject         = "put_object"
	OpGetObject         = "get_object"
	OpDeleteObject      = "delete_object"
	OpListObjects       = "list_objects"
	OpGetObjectMetadata = "get_object_metadata"
	// OpListObjectsRecursive lists every object under a prefix, at any depth.
	OpListObjectsRecursive = "list_objects_recursive"
)

// Ctx is embedded in every request body.
type Ctx struct {
	Context *RequestContext `json:"context,omitempty"`
}

// CtxOf is the Ctx that carries rc, or none when rc is zero. A caller that encodes a
// request right away can keep rc on its stack: the appenders do not retain it.
func CtxOf(rc *RequestContext) Ctx {
	if *rc == (RequestContext{}) {
		return Ctx{}
	}
	return Ctx{Context: rc}
}

// keyvalue

type KVKeyRequest struct {
	Ctx
	Key string `json:"key"`
}

type KVGetReply struct {
	Found bool   `json:"found"`
	Value []byte `json:"value"`
}

type KVSetRequest struct {
	Ctx
	Key        string  `json:"key"`
	Value      []byte  `json:"value"`
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
}

type KVValueRequest struct {
	Ctx
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type KVSetReply struct {
	Set bool `json:"set"`
}

type KVDeleteReply struct {
	Deleted bool `json:"deleted"`
}

type KVExistsReply struct {
	Exists bool `json:"exists"`
}

// KVListKeysRequest asks for a page of keys: those starting with Prefix, after After
// ("" for the first page), at most Limit (1..1000).
type KVListKeysRequest struct {
	Ctx
	Prefix string `json:"prefix"`
	Limit  int    `json:"limit"`
	After  string `json:"after,omitempty"`
}

// KVListKeysReply is a page of keys in ascending order; NextAfter, set when more keys
// exist, is the After of the next page.
type KVListKeysReply struct {
	Keys      []string `json:"keys"`
	NextAfter string   `json:"next_after,omitempty"`
}

// KVGetTTLReply is the time a key still lives, in whole seconds rounded up (at least
// 1); 0 when the key never expires, as ttl_seconds 0 means no expiry on a write.
type KVGetTTLReply struct {
	Found      bool  `json:"found"`
	TTLSeconds int64 `json:"ttl_seconds"`
}

// Empty is the reply of operations that return nothing: {}.
type Empty struct{}

// object_storage

type ObjectRequest struct {
	Ctx
	Prefix string `json:"prefix"`
	Key    string `json:"key"`
}

type PutObjectRequest struct {
	Ctx
	Prefix  string `json:"prefix"`
	Key     string `json:"key"`
	Content []byte `json:"content"`
}

type GetObjectReply struct {
	Content []byte `json:"content"`
}

type ListObjectsRequest struct {
	Ctx
	Prefix string `json:"prefix"`
}

type ListObjectsReply struct {
	Keys []string `json:"keys"`
}

// ObjectMetadataReply carries the modification time as RFC 3339 with nanoseconds, UTC.
type ObjectMetadataReply struct {
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
}

// The object_storage transfer operations (under TransferPrefix(ObjectStorage)), for
// objects larger than one message, and their metadata.
const (
	OpTransferPut = "put"
	OpTransferGet = "get"
)

// ObjectTransfer is the metadata of an object transfer: the object it reads or writes.
type ObjectTransfer struct {
	Prefix string `json:"prefix"`
	Key    string `json:"key"`
}

// ObjectMetadata describes a stored object. Backends and the client SDK both return it,
// so their method sets match.
type ObjectMetadata struct {
	Size       int64
	ModifiedAt time.Time
}
