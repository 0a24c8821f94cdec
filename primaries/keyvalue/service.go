package keyvalue

import (
	"context"

	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// Service maps the keyvalue operations of docs/design.md §4.3 onto store, in the JSON protocol
// and the protobuf one (protobuf.go). Input is checked before it reaches the store:
// malformed bodies, wrong member types, bad keys and negative TTLs are
// INVALID_ARGUMENT errors that say what was wrong.
func Service(store Store) primaries.Service {
	h := handler{store: store}
	return primaries.Service{
		Name:        protocol.KeyValue,
		Description: "abi-engine keyvalue: byte values under UTF-8 keys, with optional TTL",
		Operations: map[string]primaries.Operation{
			protocol.OpGet:                  primaries.ReadOnly(primaries.Handle(h.get)),
			protocol.OpSet:                  primaries.Handle(h.set),
			protocol.OpSetIfNotExists:       primaries.Handle(h.setIfNotExists),
			protocol.OpDelete:               primaries.Handle(h.delete),
			protocol.OpDeleteIfValueMatches: primaries.Handle(h.deleteIfValueMatches),
			protocol.OpExists:               primaries.ReadOnly(primaries.Handle(h.exists)),
			protocol.OpListKeys:             primaries.ReadOnly(primaries.Handle(h.listKeys)),
			protocol.OpGetTTL:               primaries.ReadOnly(primaries.Handle(h.getTTL)),
		},
		Protobuf: h.protobufOps(),
	}
}

type handler struct{ store Store }

func (h handler) get(ctx context.Context, r *protocol.KVKeyRequest) (protocol.KVGetReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVGetReply{}, err
	}
	// The store's shared read where it has one: the value is only encoded into the reply.
	v, found, err := GetShared(ctx, h.store, r.Key)
	if found && v == nil {
		v = []byte{} // found with an empty value travels as "", not null
	}
	return protocol.KVGetReply{Found: found, Value: v}, err
}

func (h handler) set(ctx context.Context, r *protocol.KVSetRequest) (protocol.Empty, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.Empty{}, err
	}
	ttl, err := TTLFromSeconds(r.TTLSeconds)
	if err != nil {
		return protocol.Empty{}, err
	}
	return protocol.Empty{}, h.store.Set(ctx, r.Key, nonNil(r.Value), ttl)
}

func (h handler) setIfNotExists(ctx context.Context, r *protocol.KVSetRequest) (protocol.KVSetReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVSetReply{}, err
	}
	ttl, err := TTLFromSeconds(r.TTLSeconds)
	if err != nil {
		return protocol.KVSetReply{}, err
	}
	set, err := h.store.SetIfNotExists(ctx, r.Key, nonNil(r.Value), ttl)
	return protocol.KVSetReply{Set: set}, err
}

func (h handler) delete(ctx context.Context, r *protocol.KVKeyRequest) (protocol.KVDeleteReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVDeleteReply{}, err
	}
	deleted, err := h.store.Delete(ctx, r.Key)
	return protocol.KVDeleteReply{Deleted: deleted}, err
}

func (h handler) deleteIfValueMatches(ctx context.Context, r *protocol.KVValueRequest) (protocol.KVDeleteReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVDeleteReply{}, err
	}
	deleted, err := h.store.DeleteIfValueMatches(ctx, r.Key, nonNil(r.Value))
	return protocol.KVDeleteReply{Deleted: deleted}, err
}

func (h handler) exists(ctx context.Context, r *protocol.KVKeyRequest) (protocol.KVExistsReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVExistsReply{}, err
	}
	exists, err := h.store.Exists(ctx, r.Key)
	return protocol.KVExistsReply{Exists: exists}, err
}

// nonNil treats a missing or null value as the empty value.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
