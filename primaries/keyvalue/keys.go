package keyvalue

// list_keys and get_ttl, in both codecs: what the service tells about its keys rather
// than their values. The protobuf side follows the Python engine (a missing key is
// KV_NOT_FOUND, a TTL that never ends is an unset field); the JSON side keeps the JSON
// protocol's habits (found=false, ttl_seconds 0 for no expiry).

import (
	"context"
	"time"

	"github.com/abi-engine/engine/primaries"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// TTLSeconds is a key's remaining TTL as both codecs report it: whole seconds rounded
// up, so a live key never reads 0 (which means "never expires").
func TTLSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

func (h handler) listKeys(ctx context.Context, r *protocol.KVListKeysRequest) (protocol.KVListKeysReply, error) {
	keys, more, err := h.store.ListKeys(ctx, r.Prefix, r.After, r.Limit)
	if err != nil {
		return protocol.KVListKeysReply{}, err
	}
	reply := protocol.KVListKeysReply{Keys: keys}
	if reply.Keys == nil {
		reply.Keys = []string{} // no keys travels as [], not null
	}
	if more {
		reply.NextAfter = keys[len(keys)-1]
	}
	return reply, nil
}

func (h handler) getTTL(ctx context.Context, r *protocol.KVKeyRequest) (protocol.KVGetTTLReply, error) {
	if err := CheckKey(r.Key); err != nil {
		return protocol.KVGetTTLReply{}, err
	}
	ttl, found, err := h.store.TTL(ctx, r.Key)
	return protocol.KVGetTTLReply{Found: found, TTLSeconds: TTLSeconds(ttl)}, err
}

// keysProtobufOps are the protobuf sides of list_keys and get_ttl.
func (h handler) keysProtobufOps() map[string]primaries.ProtoOperation {
	list := primaries.HandleProto(func() *kvv1.ListKeysRequest { return new(kvv1.ListKeysRequest) }, h.pbListKeys,
		func(e *commonv1.CallError) *kvv1.ListKeysResponse { return &kvv1.ListKeysResponse{Error: e} })
	list.Run = primaries.ReadOnly(list.Run)
	ttl := primaries.HandleProto(func() *kvv1.GetTtlRequest { return new(kvv1.GetTtlRequest) }, h.pbGetTTL,
		func(e *commonv1.CallError) *kvv1.GetTtlResponse { return &kvv1.GetTtlResponse{Error: e} })
	ttl.Run = primaries.ReadOnly(ttl.Run)
	return map[string]primaries.ProtoOperation{protocol.OpListKeys: list, protocol.OpGetTTL: ttl}
}

func (h handler) pbListKeys(ctx context.Context, r *kvv1.ListKeysRequest) (*kvv1.ListKeysResponse, error) {
	keys, more, err := h.store.ListKeys(ctx, r.Prefix, r.GetAfter(), int(r.Limit))
	if err != nil {
		return nil, err
	}
	reply := &kvv1.ListKeysResponse{Keys: keys}
	if more {
		reply.NextAfter = &keys[len(keys)-1]
	}
	return reply, nil
}

func (h handler) pbGetTTL(ctx context.Context, r *kvv1.GetTtlRequest) (*kvv1.GetTtlResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	ttl, found, err := h.store.TTL(ctx, r.Key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, keyNotFound(r.Key)
	}
	reply := &kvv1.GetTtlResponse{}
	if ttl > 0 { // unset: the key never expires
		s := TTLSeconds(ttl)
		reply.Seconds = &s
	}
	return reply, nil
}
