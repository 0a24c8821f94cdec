package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// BenchmarkGet measures what the SDK adds to a request: 16 requesters against one
// responder that answers every get as an engine would (the instance header, a KVGetReply
// body), through nats.go alone ("raw": a request and the header read) and through
// KeyValue.Get ("sdk": the retry logic, the overflow header, encoding and decoding).
// The responder is the same for both, so the difference per call is the SDK's.
func BenchmarkGet(b *testing.B) {
	srv := natstest.Start(b)
	rc := natstest.Connect(b, srv.URL())
	subject := protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet)
	header := nats.Header{protocol.HeaderInstance: []string{"0123456789abcdef0123456789abcdef"}}
	body := protocol.KVGetReply{Found: true, Value: []byte("a value of some thirty-two bytes")}.AppendJSON(nil)
	sub, err := rc.QueueSubscribe(subject, "q", func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Header: header, Data: body})
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := rc.Flush(); err != nil {
		b.Fatal(err)
	}
	request, err := protocol.KVKeyRequest{Key: "bench-key"}.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("raw", func(b *testing.B) {
		nc := natstest.Connect(b, srv.URL())
		requesters(b, func() error {
			m, err := nc.Request(subject, request, 10*time.Second)
			if err == nil && m.Header.Get(protocol.HeaderInstance) == "" {
				b.Error("a reply without the instance header")
			}
			return err
		})
	})
	b.Run("raw-overflow-header", func(b *testing.B) {
		nc := natstest.Connect(b, srv.URL())
		h := overflowHeader()
		requesters(b, func() error {
			m, err := nc.RequestMsg(&nats.Msg{Subject: subject, Data: request, Header: h}, 10*time.Second)
			if err == nil && m.Header.Get(protocol.HeaderInstance) == "" {
				b.Error("a reply without the instance header")
			}
			return err
		})
	})
	b.Run("sdk", func(b *testing.B) {
		tr, err := NewTransport(natstest.Connect(b, srv.URL()))
		if err != nil {
			b.Fatal(err)
		}
		kv := NewKeyValue(tr)
		requesters(b, func() error {
			_, found, err := kv.Get(context.Background(), "bench-key")
			if err == nil && !found {
				b.Error("a get that found nothing")
			}
			return err
		})
	})
}

// requesters runs b.N calls of call from 16 goroutines and reports ops/s.
func requesters(b *testing.B, call func() error) {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if call() != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n != 0 {
		b.Fatalf("%d of %d calls failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

// BenchmarkGetOverhead is the SDK's own CPU per KeyValue.Get, with no broker: the
// connection answers at once with the reply an engine sends (the instance header, a
// 64-byte value). What BenchmarkGet measures is mostly nats.go and the broker; this is
// the part the SDK can change (encoding, the retry logic, decoding), without their
// noise. "deadline" is the common caller, whose context has one; "background" gets the
// transport's default timeout.
func BenchmarkGetOverhead(b *testing.B) {
	body := protocol.KVGetReply{Found: true, Value: make([]byte, 64)}.AppendJSON(nil)
	reply := &nats.Msg{Header: nats.Header{protocol.HeaderInstance: []string{"0123456789abcdef0123456789abcdef"}}, Data: body}
	tr, err := newTransport(answeringConn{reply: reply})
	if err != nil {
		b.Fatal(err)
	}
	kv := NewKeyValue(tr)
	get := func(b *testing.B, ctx context.Context) {
		if _, found, err := kv.Get(ctx, "bench-0123456789/42"); err != nil || !found {
			b.Fatalf("get: found %v, %v", found, err)
		}
	}
	b.Run("deadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			get(b, ctx)
		}
	})
	b.Run("background", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			get(b, context.Background())
		}
	})
}

// answeringConn is a conn whose every request is answered with reply at once; unlike
// scripted (retry_test.go) it records nothing, so it costs a benchmark nothing.
type answeringConn struct{ reply *nats.Msg }

func (c answeringConn) RequestMsgWithContext(context.Context, *nats.Msg) (*nats.Msg, error) {
	return c.reply, nil
}

func (c answeringConn) RequestMsg(*nats.Msg, time.Duration) (*nats.Msg, error) { return c.reply, nil }

func (c answeringConn) RequestWithContext(context.Context, string, []byte) (*nats.Msg, error) {
	return c.reply, nil
}

func (c answeringConn) Request(string, []byte, time.Duration) (*nats.Msg, error) { return c.reply, nil }

func (c answeringConn) MaxPayload() int64 { return 1 << 20 }
