package keyvalue

// The keyvalue protobuf contract (package abi.keyvalue.v1), served beside the JSON one
// on the same subjects. It differs from JSON where the Python clients expect it to: a
// missing key is KV_NOT_FOUND for get and delete (JSON: found/deleted false), the
// oneof result is set even when false or empty, and the TTL is whole seconds, absent
// for none.

import (
	"context"
	"maps"
	"time"

	"github.com/abi-engine/engine/primaries"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// protobufOps is the protobuf side of every operation of the service.
func (h handler) protobufOps() map[string]primaries.ProtoOperation {
	get := primaries.HandleProto(func() *kvv1.GetRequest { return new(kvv1.GetRequest) }, h.pbGet,
		func(e *commonv1.CallError) *kvv1.GetResponse {
			return &kvv1.GetResponse{Result: &kvv1.GetResponse_Error{Error: e}}
		})
	get.Run = primaries.ReadOnly(get.Run)
	exists := primaries.HandleProto(func() *kvv1.ExistsRequest { return new(kvv1.ExistsRequest) }, h.pbExists,
		func(e *commonv1.CallError) *kvv1.ExistsResponse {
			return &kvv1.ExistsResponse{Result: &kvv1.ExistsResponse_Error{Error: e}}
		})
	exists.Run = primaries.ReadOnly(exists.Run)
	ops := h.keysProtobufOps()
	maps.Copy(ops, map[string]primaries.ProtoOperation{
		protocol.OpGet:    get,
		protocol.OpExists: exists,
		protocol.OpSet: primaries.HandleProto(func() *kvv1.SetRequest { return new(kvv1.SetRequest) }, h.pbSet,
			func(e *commonv1.CallError) *kvv1.SetResponse { return &kvv1.SetResponse{Error: e} }),
		protocol.OpSetIfNotExists: primaries.HandleProto(func() *kvv1.SetIfNotExistsRequest { return new(kvv1.SetIfNotExistsRequest) }, h.pbSetIfNotExists,
			func(e *commonv1.CallError) *kvv1.SetIfNotExistsResponse {
				return &kvv1.SetIfNotExistsResponse{Result: &kvv1.SetIfNotExistsResponse_Error{Error: e}}
			}),
		protocol.OpDelete: primaries.HandleProto(func() *kvv1.DeleteRequest { return new(kvv1.DeleteRequest) }, h.pbDelete,
			func(e *commonv1.CallError) *kvv1.DeleteResponse { return &kvv1.DeleteResponse{Error: e} }),
		protocol.OpDeleteIfValueMatches: primaries.HandleProto(func() *kvv1.DeleteIfValueMatchesRequest { return new(kvv1.DeleteIfValueMatchesRequest) }, h.pbDeleteIfValueMatches,
			func(e *commonv1.CallError) *kvv1.DeleteIfValueMatchesResponse {
				return &kvv1.DeleteIfValueMatchesResponse{Result: &kvv1.DeleteIfValueMatchesResponse_Error{Error: e}}
			}),
	})
	return ops
}

// keyNotFound is the Python engine's error for a missing key, text included.
func keyNotFound(key string) error {
	return protocol.Errorf(protocol.KVNotFound, "Key not found: %s", key)
}

func (h handler) pbGet(ctx context.Context, r *kvv1.GetRequest) (*kvv1.GetResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	v, found, err := GetShared(ctx, h.store, r.Key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, keyNotFound(r.Key)
	}
	// The oneof is set even for an empty value (bytes 0a 00): a client reads an unset
	// result as "no value".
	return &kvv1.GetResponse{Result: &kvv1.GetResponse_Value{Value: nonNil(v)}}, nil
}

func (h handler) pbSet(ctx context.Context, r *kvv1.SetRequest) (*kvv1.SetResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	ttl, err := ttlFromProto(r.Ttl)
	if err != nil {
		return nil, err
	}
	return &kvv1.SetResponse{}, h.store.Set(ctx, r.Key, nonNil(r.Value), ttl)
}

func (h handler) pbSetIfNotExists(ctx context.Context, r *kvv1.SetIfNotExistsRequest) (*kvv1.SetIfNotExistsResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	ttl, err := ttlFromProto(r.Ttl)
	if err != nil {
		return nil, err
	}
	set, err := h.store.SetIfNotExists(ctx, r.Key, nonNil(r.Value), ttl)
	if err != nil {
		return nil, err
	}
	return &kvv1.SetIfNotExistsResponse{Result: &kvv1.SetIfNotExistsResponse_OkValue{OkValue: set}}, nil
}

func (h handler) pbDelete(ctx context.Context, r *kvv1.DeleteRequest) (*kvv1.DeleteResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	deleted, err := h.store.Delete(ctx, r.Key)
	if err != nil {
		return nil, err
	}
	if !deleted {
		return nil, keyNotFound(r.Key)
	}
	return &kvv1.DeleteResponse{}, nil
}

func (h handler) pbDeleteIfValueMatches(ctx context.Context, r *kvv1.DeleteIfValueMatchesRequest) (*kvv1.DeleteIfValueMatchesResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	deleted, err := h.store.DeleteIfValueMatches(ctx, r.Key, nonNil(r.Value))
	if err != nil {
		return nil, err
	}
	return &kvv1.DeleteIfValueMatchesResponse{Result: &kvv1.DeleteIfValueMatchesResponse_OkValue{OkValue: deleted}}, nil
}

func (h handler) pbExists(ctx context.Context, r *kvv1.ExistsRequest) (*kvv1.ExistsResponse, error) {
	if err := CheckKey(r.Key); err != nil {
		return nil, err
	}
	exists, err := h.store.Exists(ctx, r.Key)
	if err != nil {
		return nil, err
	}
	return &kvv1.ExistsResponse{Result: &kvv1.ExistsResponse_OkValue{OkValue: exists}}, nil
}

// ttlFromProto is the TTL of a protobuf write: absent is none; whole seconds above 0
// otherwise. 0 and negative TTLs are refused, where the Python engine's backends
// disagree (one stores an entry already expired, another fails): a deliberate
// difference, documented in docs/protocol.md.
func ttlFromProto(ttl *int64) (time.Duration, error) {
	if ttl == nil {
		return 0, nil
	}
	s := *ttl
	switch {
	case s <= 0:
		return 0, protocol.Errorf(protocol.InvalidArgument, "ttl must be a whole number of seconds above 0, got %d; leave it unset for no expiry", s)
	case float64(s) >= maxTTLSeconds:
		return 0, protocol.Errorf(protocol.InvalidArgument, "ttl %d is too large, the limit is %.0f seconds", s, maxTTLSeconds)
	}
	return time.Duration(s) * time.Second, nil
}
