package primaries

// Request overflow (protocol/overflowrequest.go): a protobuf call with an empty body
// whose header names the overflow upload holding its request. After the token (the
// order the Python engine checks a call in), the request is read from the upload, which
// is closed, and the call goes on with those bytes as its body.

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// Uploads reads a request too large for one message; sessions.OverflowHost is one.
// ReadRequest returns the bytes of upload id for a call of caller (its token's sub)
// carrying header, and closes the upload; its errors are *protocol.Error. The bytes
// count against the engine's session budget until release, which the call makes once
// it has run.
type Uploads interface {
	ReadRequest(ctx context.Context, id, caller string, header nats.Header) (data []byte, release func(), err error)
}

// uploaded reports whether req names an overflow upload. Headers are read as sent
// (NATS keeps their case), and the Python clients send this one's canonical form.
func uploaded(req micro.Request) bool {
	return len(req.Headers()[protocol.HeaderOverflowRequest]) > 0
}

// readUpload is the request of a call that names an upload, and its release (nil
// when it failed).
func (p *Primary) readUpload(ctx context.Context, j job, caller string) ([]byte, func(), *protocol.Error) {
	h := nats.Header(j.req.Headers())
	id := h.Get(protocol.HeaderOverflowRequest)
	switch {
	case len(j.req.Data()) > 0:
		return nil, nil, protocol.Errorf(protocol.InvalidArgument,
			"a request naming an overflow upload (%s) must have an empty body; this one has %d bytes", protocol.HeaderOverflowRequest, len(j.req.Data()))
	case p.cfg.Uploads == nil:
		return nil, nil, protocol.Errorf(protocol.Unavailable, "This process cannot read overflowed requests")
	}
	data, release, err := p.cfg.Uploads.ReadRequest(ctx, id, caller, h)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, nil, pe
		}
		return nil, nil, protocol.Errorf(protocol.Internal, "reading the overflowed request %s: %v", id, err)
	}
	return data, release, nil
}
