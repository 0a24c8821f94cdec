package keyvalue_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

// requesters is how many callers run at once in the benchmarks.
const requesters = 16

// BenchmarkKeyValueGet measures keyvalue get over NATS with 16 concurrent requesters:
// "raw" is a bare micro endpoint doing the same lookup in the same memory store (the
// same JSON decoding and encoding, one call at a time as micro runs it), "raw-header"
// the same stamping the instance header as the protocol requires of any responder,
// "primary" the ServicePrimary as the engine serves the memory backend (inline on
// micro's callback; concurrency limit, call counting, lease check, instance header,
// error envelope), "primary-pool" the same with the worker hand-off a backend doing
// I/O gets. Compare their ops/s and allocations (docs/performance.md).
func BenchmarkKeyValueGet(b *testing.B) {
	value := []byte("a value of some thirty-two bytes")
	newStore := func(b *testing.B) *memory.Store {
		s := memory.New()
		if err := s.Set(context.Background(), "bench-key", value, 0); err != nil {
			b.Fatal(err)
		}
		return s
	}
	body, err := json.Marshal(protocol.KVKeyRequest{Key: "bench-key"})
	if err != nil {
		b.Fatal(err)
	}
	subject := protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet)

	// raw serves the bare micro endpoint; with header it stamps the instance header,
	// the one piece of work the protocol requires of any responder.
	raw := func(b *testing.B, header micro.Headers) {
		srv := natstest.Start(b)
		store := newStore(b)
		svcConn := natstest.Connect(b, srv.URL())
		svc, err := micro.AddService(svcConn, micro.Config{Name: protocol.KeyValue, Version: protocol.ServiceVersion})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = svc.Stop() })
		var opts []micro.RespondOpt
		if header != nil {
			opts = append(opts, micro.WithHeaders(header))
		}
		err = svc.AddEndpoint(protocol.OpGet, micro.HandlerFunc(func(req micro.Request) {
			var r protocol.KVKeyRequest
			if err := json.Unmarshal(req.Data(), &r); err != nil {
				_ = req.Error("400", err.Error(), nil)
				return
			}
			v, found, err := store.Get(context.Background(), r.Key)
			if err != nil {
				_ = req.Error("500", err.Error(), nil)
				return
			}
			_ = req.RespondJSON(protocol.KVGetReply{Found: found, Value: v}, opts...)
		}), micro.WithEndpointSubject(subject))
		if err != nil {
			b.Fatal(err)
		}
		// Like the primary's Serve: the subscription is confirmed before anyone calls.
		if err := svcConn.Flush(); err != nil {
			b.Fatal(err)
		}
		runGets(b, natstest.Connect(b, srv.URL()), subject, body)
	}
	b.Run("raw", func(b *testing.B) { raw(b, nil) })
	b.Run("raw-header", func(b *testing.B) {
		raw(b, micro.Headers{protocol.HeaderInstance: []string{"0123456789abcdef0123456789abcdef"}})
	})

	b.Run("primary", func(b *testing.B) {
		svc := keyvalue.Service(newStore(b))
		svc.Inline = true
		runGets(b, serveService(b, svc), subject, body)
	})

	b.Run("primary-pool", func(b *testing.B) {
		runGets(b, servePrimary(b, newStore(b)), subject, body)
	})

	// primary-protobuf is "primary" as a Python client calls it: a protobuf body and a
	// service token the primary verifies (HS256) on every call.
	b.Run("primary-protobuf", func(b *testing.B) {
		svc := keyvalue.Service(newStore(b))
		svc.Inline = true
		pb, err := proto.Marshal(&kvv1.GetRequest{Context: &commonv1.CallContext{TimeoutMs: 10000}, Key: "bench-key"})
		if err != nil {
			b.Fatal(err)
		}
		header := nats.Header{protocol.HeaderAuthToken: []string{mint(b, testSecret, "bench", time.Now())}}
		runGetsWith(b, serveService(b, svc, withTokens(b)), subject, pb, header)
	})
}

// runGets sends b.N gets from requesters goroutines and reports ops/s.
func runGets(b *testing.B, nc *nats.Conn, subject string, body []byte) {
	runGetsWith(b, nc, subject, body, nil)
}

// runGetsWith is runGets with headers on every request (nil: none).
func runGetsWith(b *testing.B, nc *nats.Conn, subject string, body []byte, header nats.Header) {
	b.Helper()
	request := func() (*nats.Msg, error) {
		if header == nil {
			return nc.Request(subject, body, callTimeout)
		}
		return nc.RequestMsg(&nats.Msg{Subject: subject, Data: body, Header: header}, callTimeout)
	}
	if _, err := request(); err != nil { // warm up, and prove it serves
		b.Fatal(err)
	}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range requesters {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				m, err := request()
				if err != nil || m.Header.Get(protocol.HeaderErrorCode) != "" || m.Header.Get(micro.ErrorCodeHeader) != "" {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n != 0 {
		b.Fatalf("%d of %d gets failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}
