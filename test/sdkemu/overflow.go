package sdkemu

import (
	"context"
	"fmt"
	"strconv"
)

// MaxOverflowBytes is the SDK's cap on a value moved through the overflow host, both
// ways (256 MiB).
const MaxOverflowBytes = 256 << 20

// overflowChunk is the chunk the SDK asks of the overflow host: min(1 MiB, max/2).
func (t *Transport) overflowChunk() int64 {
	return min(1<<20, t.nc.MaxPayload()/2)
}

// upload sends a request too large for one message to the overflow host (open with
// operation "request", writes from sequence 0, no start) and returns the session id
// the call names in Abi-Overflow-Request. A failed write closes the session.
func (t *Transport) upload(ctx context.Context, body []byte) (string, error) {
	chunk := t.overflowChunk()
	if chunk < 1024 {
		return "", &RPCError{Code: "PAYLOAD_TOO_LARGE", Message: "Request exceeds broker limit"}
	}
	if len(body) > MaxOverflowBytes {
		return "", &RPCError{Code: "PAYLOAD_TOO_LARGE", Message: fmt.Sprintf("Request exceeds the %d-byte overflow limit; use streaming or a storage reference", MaxOverflowBytes)}
	}
	x, err := t.Open(ctx, OverflowPrefix, "request", nil, uint32(chunk))
	if err != nil {
		return "", err
	}
	if x.Chunk == 0 {
		_ = x.Close(ctx)
		return "", fmt.Errorf("%w: the overflow open granted chunk_bytes 0", ErrProtocol)
	}
	for seq := uint64(0); len(body) > 0; seq++ {
		n := min(len(body), int(x.Chunk))
		if err := x.Write(ctx, seq, body[:n]); err != nil {
			_ = x.Close(ctx)
			return "", err
		}
		body = body[n:]
	}
	return x.ID, nil
}

// download reads a parked reply: its announced size checked, read from sequence 0
// without a start, stopping once past the size, the total compared with the size, and
// the session closed whatever happened.
func (t *Transport) download(ctx context.Context, id, sizeHeader string) ([]byte, error) {
	x := t.Session(OverflowPrefix, id)
	defer func() { _ = x.Close(ctx) }()
	size, err := strconv.ParseInt(sizeHeader, 10, 64)
	if err != nil || size < 0 {
		return nil, &RPCError{Code: "INTERNAL", Message: "Overflowed reply without a valid size"}
	}
	if size > MaxOverflowBytes {
		return nil, &RPCError{Code: "PAYLOAD_TOO_LARGE", Message: fmt.Sprintf("Reply exceeds the %d-byte overflow limit; use streaming or a storage reference", MaxOverflowBytes)}
	}
	data, _, err := x.ReadAll(ctx, size)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, &RPCError{Code: "INTERNAL", Message: fmt.Sprintf("overflow reply has %d bytes, announced %d", len(data), size)}
	}
	return data, nil
}

// closeSession closes a session of prefix, ignoring the outcome (it may be gone).
func (t *Transport) closeSession(prefix, id string) {
	_ = t.Session(prefix, id).Close(context.Background())
}
