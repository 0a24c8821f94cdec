package jsdomain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish is js.PublishMsg(ctx, m) without options, for the engine's writes: the same
// request, the same retries of "no responders" (a leader being elected), the same
// errors (a *jetstream.APIError wrapped as nats.go wraps it, ErrNoStreamResponse,
// ErrInvalidJSAck), and in js's domain. It reads the server's usual acknowledgement,
// {"stream":"S","seq":N} (with "domain" when the stream has one), without
// encoding/json, which took nearly half of a fenced write's publish in the engine's
// CPU profile on R3; any other answer is read as nats.go reads it. A handle New did
// not open (an embedder's, a test's wrapper) publishes through its own PublishMsg.
func Publish(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error) {
	switch j := js.(type) {
	case *local:
		js = j.JetStream
	case *inDomain:
		js, m = j.JetStream, j.msg(m)
	default:
		return js.PublishMsg(ctx, m)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmpTimeout(js.Options().DefaultTimeout))
		defer cancel()
	}
	nc := js.Conn()
	resp, err := nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		t := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = nc.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return nil, err
	}
	if ack, ok := parseAck(resp.Data); ok {
		return ack, nil
	}
	var full struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(resp.Data, &full); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if full.Error != nil {
		return nil, fmt.Errorf("nats: %w", full.Error)
	}
	if full.PubAck == nil || full.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return full.PubAck, nil
}

// defaultTimeout is nats.go's bound on a JetStream request whose context has none.
const defaultTimeout = 5 * time.Second

func cmpTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}

// The prefixes of the acknowledgement a stream sends (nats-server's mset.pubAck).
var (
	ackStream = []byte(`{"stream":"`)
	ackDomain = []byte(`,"domain":"`)
	ackSeq    = []byte(`,"seq":`)
)

// parseAck reads exactly {"stream":"S","seq":N} or {"stream":"S","domain":"D","seq":N};
// ok is false for anything else (an error, a duplicate, a batch's or a counter's
// fields), which the caller reads with encoding/json.
func parseAck(b []byte) (*jetstream.PubAck, bool) {
	rest, ok := bytes.CutPrefix(b, ackStream)
	if !ok {
		return nil, false
	}
	stream, rest, ok := cutName(rest)
	if !ok || stream == "" {
		return nil, false
	}
	var domain string
	if after, isDomain := bytes.CutPrefix(rest, ackDomain); isDomain {
		if domain, rest, ok = cutName(after); !ok {
			return nil, false
		}
	}
	digits, ok := bytes.CutPrefix(rest, ackSeq)
	if !ok || len(digits) < 2 || digits[len(digits)-1] != '}' {
		return nil, false
	}
	seq, err := strconv.ParseUint(string(digits[:len(digits)-1]), 10, 64)
	if err != nil {
		return nil, false
	}
	return &jetstream.PubAck{Stream: stream, Sequence: seq, Domain: domain}, true
}

// cutName cuts a JSON string's body up to its closing quote, refusing escapes (a
// stream or domain name never needs one).
func cutName(b []byte) (name string, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '"')
	if i < 0 || bytes.IndexByte(b[:i], '\\') >= 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}
