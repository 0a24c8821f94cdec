package sdkemu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	objectstoragev1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
)

// Prefixes of the two transfer hosts the Python clients drive.
const (
	ObjectsPrefix  = "abi.svc.object_storage.v1.transfer"
	OverflowPrefix = "abi.rpc.overflow"
)

// pendingPause is how long the SDK waits before asking again for a piece that was not
// ready: part of the protocol, not of a test's synchronisation.
const pendingPause = 20 * time.Millisecond

// TransferSubject is the subject of op on a session, as the SDK's transfer_subject
// builds it: an id "<owner>:<...>" goes to prefix.<owner>.op, and its owner must be 32
// lowercase hex; an id without ':' goes to the legacy prefix.op.
func TransferSubject(prefix, op, id string) (string, error) {
	owner, _, ok := strings.Cut(id, ":")
	if !ok {
		return prefix + "." + op, nil
	}
	if len(owner) != 32 || strings.Trim(owner, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: Invalid transfer owner %q", ErrProtocol, owner)
	}
	return prefix + "." + owner + "." + op, nil
}

// Transfer is one session on a transfer host.
type Transfer struct {
	t      *Transport
	Prefix string
	ID     string
	// Chunk is the chunk size the host granted at the open.
	Chunk uint32
}

// exchange is one request of a session's protocol: the token always, Abi-Overflow: 1
// on every exchange but the overflow host's chunk exchanges (the newest SDK sends
// object transfer exchanges through its plain call), micro's headers checked before
// decoding, the error field (15) returned as an *RPCError.
func (t *Transport) exchange(ctx context.Context, prefix, subject string, req, resp proto.Message) error {
	token, err := t.checkedToken()
	if err != nil {
		return err
	}
	body, err := proto.Marshal(t.withContext(req))
	if err != nil {
		return err
	}
	msg, err := t.request(ctx, subject, t.headers(token, prefix != OverflowPrefix), body)
	if err != nil {
		return err
	}
	if err := microError(msg.Header); err != nil {
		return err
	}
	if err := proto.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("decode %s: %w", resp.ProtoReflect().Descriptor().FullName(), err)
	}
	return ErrorOf(resp)
}

// Open opens a session of operation on prefix.
func (t *Transport) Open(ctx context.Context, prefix, operation string, metadata []byte, chunk uint32) (*Transfer, error) {
	var rep transferv1.OpenResponse
	req := &transferv1.OpenRequest{Operation: operation, Metadata: metadata, ChunkBytes: chunk}
	if err := t.exchange(ctx, prefix, prefix+".open", req, &rep); err != nil {
		return nil, err
	}
	if _, err := TransferSubject(prefix, "read", rep.GetId()); err != nil {
		return nil, err
	}
	return &Transfer{t: t, Prefix: prefix, ID: rep.GetId(), Chunk: rep.GetChunkBytes()}, nil
}

// Session is a handle on a session opened elsewhere (a parked reply, another
// caller's session), driven by t.
func (t *Transport) Session(prefix, id string) *Transfer {
	return &Transfer{t: t, Prefix: prefix, ID: id}
}

func (x *Transfer) call(ctx context.Context, op string, req, resp proto.Message) error {
	subject, err := TransferSubject(x.Prefix, op, x.ID)
	if err != nil {
		return err
	}
	return x.t.exchange(ctx, x.Prefix, subject, req, resp)
}

// Write sends one piece of the upload.
func (x *Transfer) Write(ctx context.Context, sequence uint64, data []byte) error {
	return x.call(ctx, "write", &transferv1.WriteRequest{Id: x.ID, Sequence: sequence, Data: data}, &transferv1.WriteResponse{})
}

// Start runs the session's operation.
func (x *Transfer) Start(ctx context.Context) error {
	return x.call(ctx, "start", &transferv1.StartRequest{Id: x.ID}, &transferv1.StartResponse{})
}

// Close ends the session; the SDK closes whatever happened and only logs a failure.
func (x *Transfer) Close(ctx context.Context) error {
	return x.call(ctx, "close", &transferv1.CloseRequest{Id: x.ID}, &transferv1.CloseResponse{})
}

// Read asks for the piece at sequence: one exchange. A reply for another sequence is a
// protocol breach.
func (x *Transfer) Read(ctx context.Context, sequence uint64) (*transferv1.ReadResponse, error) {
	var rep transferv1.ReadResponse
	if err := x.call(ctx, "read", &transferv1.ReadRequest{Id: x.ID, Sequence: sequence}, &rep); err != nil {
		return &rep, err
	}
	if rep.GetSequence() != sequence {
		return &rep, fmt.Errorf("%w: Transfer sequence mismatch: asked %d, got %d", ErrProtocol, sequence, rep.GetSequence())
	}
	return &rep, nil
}

// ReadAll reads from sequence 0 as the SDK's fragments() does: done first (its data is
// dropped), pending waits 20 ms and asks the same sequence again, else the data is
// kept and the sequence advances. stopAfter > 0 stops once more bytes than that have
// come (the overflow download's early stop). It returns the bytes and every reply.
func (x *Transfer) ReadAll(ctx context.Context, stopAfter int64) ([]byte, []*transferv1.ReadResponse, error) {
	var data []byte
	var replies []*transferv1.ReadResponse
	for seq := uint64(0); ; {
		rep, err := x.Read(ctx, seq)
		replies = append(replies, rep)
		if err != nil {
			return data, replies, err
		}
		switch {
		case rep.GetDone():
			return data, replies, nil
		case rep.GetPending():
			if err := pause(ctx, pendingPause); err != nil {
				return data, replies, err
			}
			continue
		}
		data = append(data, rep.GetData()...)
		seq++
		if stopAfter > 0 && int64(len(data)) > stopAfter {
			return data, replies, nil
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ObjectMetadata is the open's metadata of an object transfer: a GetObjectRequest
// with prefix and key and no context.
func ObjectMetadata(prefix, key string) []byte {
	b, err := proto.Marshal(&objectstoragev1.GetObjectRequest{Prefix: prefix, Key: key})
	if err != nil {
		panic(err) // two strings always encode
	}
	return b
}

// objectChunk is the chunk the SDK asks for object transfers: min(64 KiB, max/2).
func (t *Transport) objectChunk() uint32 {
	return uint32(min(64<<10, t.nc.MaxPayload()/2))
}

// PutObjectStream stores data as the SDK's put_object_stream does: open "put", writes
// of the granted chunk from sequence 0, start, reads until done (surfacing the store's
// error), close always. It returns the session it used.
func (t *Transport) PutObjectStream(ctx context.Context, prefix, key string, data []byte) (*Transfer, error) {
	x, err := t.Open(ctx, ObjectsPrefix, "put", ObjectMetadata(prefix, key), t.objectChunk())
	if err != nil {
		return nil, err
	}
	defer func() { _ = x.Close(ctx) }()
	if x.Chunk == 0 {
		return x, fmt.Errorf("%w: the open granted chunk_bytes 0", ErrProtocol)
	}
	for seq := uint64(0); len(data) > 0; seq++ {
		n := min(len(data), int(x.Chunk))
		if err := x.Write(ctx, seq, data[:n]); err != nil {
			return x, err
		}
		data = data[n:]
	}
	if err := x.Start(ctx); err != nil {
		return x, err
	}
	_, _, err = x.ReadAll(ctx, 0)
	return x, err
}

// GetObjectStream reads an object as the SDK's get_object does: open "get", start,
// reads until done, close always. It returns the bytes and every read reply.
func (t *Transport) GetObjectStream(ctx context.Context, prefix, key string) ([]byte, []*transferv1.ReadResponse, error) {
	x, err := t.Open(ctx, ObjectsPrefix, "get", ObjectMetadata(prefix, key), t.objectChunk())
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = x.Close(ctx) }()
	if err := x.Start(ctx); err != nil {
		return nil, nil, err
	}
	return x.ReadAll(ctx, 0)
}

// IsCode reports whether err is an *RPCError with code.
func IsCode(err error, code string) bool {
	var e *RPCError
	return errors.As(err, &e) && e.Code == code
}
