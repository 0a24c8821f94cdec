package objectstorage

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/primaries"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// Service maps the object_storage operations of docs/design.md §4.3 onto store, in the JSON
// protocol and the protobuf one (protobuf.go). Names are
// checked before they reach the store: a bad prefix or key is INVALID_ARGUMENT saying
// what was wrong.
func Service(store Store) primaries.Service {
	h := handler{store: store}
	return primaries.Service{
		Name:        protocol.ObjectStorage,
		Description: "abi-engine object_storage: objects by prefix and key",
		Operations: map[string]primaries.Operation{
			protocol.OpPutObject:            primaries.Handle(h.put),
			protocol.OpGetObject:            primaries.ReadOnly(primaries.Handle(h.get)),
			protocol.OpDeleteObject:         primaries.Handle(h.delete),
			protocol.OpListObjects:          primaries.ReadOnly(primaries.Handle(h.list)),
			protocol.OpListObjectsRecursive: primaries.ReadOnly(primaries.Handle(h.listRecursive)),
			protocol.OpGetObjectMetadata:    primaries.ReadOnly(primaries.Handle(h.metadata)),
		},
		Protobuf: h.protobufOps(),
		// A get_object's reply may be parked: it reserves the object and its reply
		// before the backend reads it (ReserveRead).
		Reserves: []string{protocol.OpGetObject},
	}
}

type handler struct{ store Store }

func (h handler) put(ctx context.Context, r *protocol.PutObjectRequest) (protocol.Empty, error) {
	if err := CheckName(r.Prefix, r.Key); err != nil {
		return protocol.Empty{}, err
	}
	content := r.Content
	if content == nil {
		content = []byte{}
	}
	return protocol.Empty{}, h.store.PutObject(ctx, r.Prefix, r.Key, content)
}

func (h handler) get(ctx context.Context, r *protocol.ObjectRequest) (getObjectReply, error) {
	if err := CheckName(r.Prefix, r.Key); err != nil {
		return getObjectReply{}, err
	}
	ctx, g := withGet(ctx)
	content, err := h.store.GetObject(ctx, r.Prefix, r.Key)
	if err != nil {
		return getObjectReply{}, err
	}
	if enc := g.encoded(content); enc != nil {
		return getObjectReply{encoded: enc}, nil
	}
	if content == nil {
		content = []byte{} // an empty object travels as "", not null
	}
	return getObjectReply{GetObjectReply: protocol.GetObjectReply{Content: content}}, nil
}

// getObjectReply is get_object's JSON reply: the content to encode, or the reply
// already encoded where the object was read (ReadBuffer).
type getObjectReply struct {
	protocol.GetObjectReply
	encoded []byte
}

// AppendJSON appends the reply; an encoded reply appended to nothing is returned as
// it is, so the reply is never copied.
func (r getObjectReply) AppendJSON(b []byte) []byte {
	switch {
	case r.encoded == nil:
		return r.GetObjectReply.AppendJSON(b)
	case len(b) == 0:
		return r.encoded
	default:
		return append(b, r.encoded...)
	}
}

func (h handler) delete(ctx context.Context, r *protocol.ObjectRequest) (protocol.Empty, error) {
	if err := CheckName(r.Prefix, r.Key); err != nil {
		return protocol.Empty{}, err
	}
	return protocol.Empty{}, h.store.DeleteObject(ctx, r.Prefix, r.Key)
}

func (h handler) list(ctx context.Context, r *protocol.ListObjectsRequest) (protocol.ListObjectsReply, error) {
	if err := CheckPrefix(r.Prefix); err != nil {
		return protocol.ListObjectsReply{}, err
	}
	keys, err := h.store.ListObjects(ctx, r.Prefix)
	if keys == nil {
		keys = []string{} // no objects travels as [], not null
	}
	return protocol.ListObjectsReply{Keys: keys}, err
}

func (h handler) listRecursive(ctx context.Context, r *protocol.ListObjectsRequest) (protocol.ListObjectsReply, error) {
	if err := CheckPrefix(r.Prefix); err != nil {
		return protocol.ListObjectsReply{}, err
	}
	keys, err := h.store.ListObjectsRecursive(ctx, r.Prefix)
	if keys == nil {
		keys = []string{}
	}
	return protocol.ListObjectsReply{Keys: keys}, err
}

func (h handler) metadata(ctx context.Context, r *protocol.ObjectRequest) (protocol.ObjectMetadataReply, error) {
	if err := CheckName(r.Prefix, r.Key); err != nil {
		return protocol.ObjectMetadataReply{}, err
	}
	md, err := h.store.GetObjectMetadata(ctx, r.Prefix, r.Key)
	if err != nil {
		return protocol.ObjectMetadataReply{}, err
	}
	return protocol.ObjectMetadataReply{Size: md.Size, ModifiedAt: md.ModifiedAt.UTC().Format(time.RFC3339Nano)}, nil
}

// Transfers are the transfer operations for objects larger than one message, served
// by a sessions.TransferHost on protocol.TransferPrefix(protocol.ObjectStorage):
// protocol.OpTransferPut stores the session's upload as the object, protocol.OpTransferGet
// returns the object for the session's reads. The metadata of both is a
// protocol.ObjectTransfer naming the object.
//
// A get reads the object's size from its metadata and reserves it in the session's
// budget (sessions.TransferRequest.Reserve) before it reads a byte, so starts beyond
// the budget are refused RESOURCE_EXHAUSTED having read nothing; and at most
// maxTransferReads gets of the map read their objects at once, the others waiting
// their turn (bounded by the start's context).
func Transfers(store Store) map[string]sessions.Handler {
	reads := make(chan struct{}, maxTransferReads)
	return map[string]sessions.Handler{
		protocol.OpTransferPut: inCodec(func(ctx context.Context, req sessions.TransferRequest) ([]byte, error) {
			md, err := decodeMetadata(req)
			if err != nil {
				return nil, err
			}
			content := req.Upload
			if content == nil {
				content = []byte{}
			}
			return nil, store.PutObject(ctx, md.Prefix, md.Key, content)
		}),
		protocol.OpTransferGet: inCodec(func(ctx context.Context, req sessions.TransferRequest) ([]byte, error) {
			md, err := decodeMetadata(req)
			if err != nil {
				return nil, err
			}
			if req.Reserve != nil {
				info, err := store.GetObjectMetadata(ctx, md.Prefix, md.Key)
				if err != nil {
					return nil, err
				}
				if err := req.Reserve(ctx, info.Size); err != nil {
					return nil, err
				}
			}
			select {
			case reads <- struct{}{}:
				defer func() { <-reads }()
			case <-ctx.Done():
				return nil, protocol.Errorf(protocol.DeadlineExceeded, "transfer get of %s/%s waited for its turn to read until its start ended (%v); it read nothing", md.Prefix, md.Key, context.Cause(ctx))
			}
			return store.GetObject(ctx, md.Prefix, md.Key)
		}),
	}
}

// inCodec gives a protobuf session the codes its clients expect: OBJECT_NOT_FOUND
// for a missing object (pbError).
func inCodec(h sessions.Handler) sessions.Handler {
	return func(ctx context.Context, req sessions.TransferRequest) ([]byte, error) {
		out, err := h(ctx, req)
		if err != nil && req.Codec == protocol.Protobuf {
			err = pbError(err)
		}
		return out, err
	}
}

// maxTransferReads bounds the transfer gets of one host that read from the backend at
// once. A JetStream read is a push consumer whose flow control lets up to 32 MiB be
// on its way to the engine's connection, and the broker cuts a connection that has more
// than its max_pending (64 MiB by default) waiting for it as a slow consumer, taking
// every service's calls with it (issue 26: 48 concurrent gets of 40 MiB objects, 4
// disconnects in 25 s). Two reads at once stay within that.
const maxTransferReads = 2

// decodeMetadata names the object of a transfer: a protocol.ObjectTransfer in a JSON
// session; in a protobuf one a GetObjectRequest without context, whose key may hold
// "/" as the unary calls' may (SplitKey).
func decodeMetadata(req sessions.TransferRequest) (protocol.ObjectTransfer, error) {
	raw := req.Metadata
	if req.Codec == protocol.Protobuf {
		var m osv1.GetObjectRequest
		if err := proto.Unmarshal(raw, &m); err != nil {
			return protocol.ObjectTransfer{}, protocol.Errorf(protocol.InvalidArgument, "the transfer's metadata is not a protobuf GetObjectRequest naming the object: %v", err)
		}
		prefix, key, err := pbName(m.GetPrefix(), m.GetKey())
		return protocol.ObjectTransfer{Prefix: prefix, Key: key}, err
	}
	var md protocol.ObjectTransfer
	if len(raw) == 0 {
		return md, protocol.Errorf(protocol.InvalidArgument, `the transfer's metadata must name the object: {"prefix": ..., "key": ...}`)
	}
	if err := primaries.Decode(raw, &md); err != nil {
		return md, err
	}
	return md, CheckName(md.Prefix, md.Key)
}

// NewTransferHost builds the object_storage transfer host over store for the engine
// instance owner, with the sessions package's default limits. leaseValid is the
// engine's lease check (sessions.TransferConfig.LeaseValid); log receives what the host
// logs (nil discards). Spawn and serve it like any sessions.TransferHost.
//
// limits, when given, are the engine's (its limits block: its budget, shared with the
// overflow host, and its bounds on sessions) and its token check (sessions.Auth).
func NewTransferHost(nc *nats.Conn, store Store, owner string, leaseValid func() bool, log *zap.Logger, limits ...sessions.ConfigOption) (*sessions.TransferHost, error) {
	cfg := sessions.TransferConfig{
		Prefix:     protocol.TransferPrefix(protocol.ObjectStorage),
		Owner:      owner,
		Handlers:   Transfers(store),
		LeaseValid: leaseValid,
		Logger:     log,
	}
	for _, l := range limits {
		l.Apply(&cfg)
	}
	return sessions.NewTransferHost(nc, cfg)
}
