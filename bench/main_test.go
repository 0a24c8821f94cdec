package bench

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is the state the in-test responders serve: a map guarded by a mutex, shared by
// every responder instance of a test, as a backend is shared by the engines.
type store struct {
	mu   sync.Mutex
	data map[string][]byte
	// served counts the calls answered; at reaches closes when it gets to atN.
	served atomic.Int64
	atN    int64
	at     chan struct{}
}

func newStore() *store { return &store{data: map[string][]byte{}} }

// reaches returns a channel closed once n calls have been answered.
func (s *store) reaches(n int64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.atN, s.at = n, make(chan struct{})
	return s.at
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

func (s *store) count() {
	n := s.served.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at != nil && n == s.atN {
		close(s.at)
	}
}

// responder behaviours.
type behaviour int

const (
	honest    behaviour = iota
	corrupt             // get returns a different value than the one stored
	forgetful           // get finds nothing
)

// serveKV answers abi.svc.keyvalue.v1.{set,set_if_not_exists,get,delete} over st in queue group "q" as
// engine instance, on nc.
func serveKV(t *testing.T, nc *nats.Conn, st *store, instance string, b behaviour) {
	t.Helper()
	handlers := map[string]func(body []byte) (any, *protocol.Error){
		protocol.OpSet: func(body []byte) (any, *protocol.Error) {
			var req protocol.KVSetRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "decode: %v", err)
			}
			st.mu.Lock()
			st.data[req.Key] = req.Value
			st.mu.Unlock()
			return protocol.Empty{}, nil
		},
		protocol.OpSetIfNotExists: func(body []byte) (any, *protocol.Error) {
			var req protocol.KVSetRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "decode: %v", err)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			if _, ok := st.data[req.Key]; ok {
				return protocol.KVSetReply{Set: false}, nil
			}
			st.data[req.Key] = req.Value
			return protocol.KVSetReply{Set: true}, nil
		},
		protocol.OpGet: func(body []byte) (any, *protocol.Error) {
			var req protocol.KVKeyRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "decode: %v", err)
			}
			st.mu.Lock()
			v, ok := st.data[req.Key]
			st.mu.Unlock()
			switch {
			case ok && b == corrupt:
				v = append([]byte("corrupt:"), v...)
			case b == forgetful:
				v, ok = nil, false
			}
			return protocol.KVGetReply{Found: ok, Value: v}, nil
		},
		protocol.OpDelete: func(body []byte) (any, *protocol.Error) {
			var req protocol.KVKeyRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "decode: %v", err)
			}
			st.mu.Lock()
			_, ok := st.data[req.Key]
			delete(st.data, req.Key)
			st.mu.Unlock()
			return protocol.KVDeleteReply{Deleted: ok}, nil
		},
	}
	serve(t, nc, st, protocol.KeyValue, instance, handlers)
}

// serveObjects answers abi.svc.object_storage.v1.{put_object,get_object,delete_object}.
func serveObjects(t *testing.T, nc *nats.Conn, st *store, instance string) {
	t.Helper()
	decode := func(body []byte) (protocol.PutObjectRequest, *protocol.Error) {
		var req protocol.PutObjectRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return req, protocol.Errorf(protocol.InvalidArgument, "decode: %v", err)
		}
		return req, nil
	}
	handlers := map[string]func(body []byte) (any, *protocol.Error){
		protocol.OpPutObject: func(body []byte) (any, *protocol.Error) {
			req, perr := decode(body)
			if perr != nil {
				return nil, perr
			}
			st.mu.Lock()
			st.data[req.Prefix+"/"+req.Key] = req.Content
			st.mu.Unlock()
			return protocol.Empty{}, nil
		},
		protocol.OpGetObject: func(body []byte) (any, *protocol.Error) {
			req, perr := decode(body)
			if perr != nil {
				return nil, perr
			}
			st.mu.Lock()
			v, ok := st.data[req.Prefix+"/"+req.Key]
			st.mu.Unlock()
			if !ok {
				return nil, protocol.Errorf(protocol.NotFound, "object %q/%q", req.Prefix, req.Key)
			}
			return protocol.GetObjectReply{Content: v}, nil
		},
		protocol.OpDeleteObject: func(body []byte) (any, *protocol.Error) {
			req, perr := decode(body)
			if perr != nil {
				return nil, perr
			}
			k := req.Prefix + "/" + req.Key
			st.mu.Lock()
			_, ok := st.data[k]
			delete(st.data, k)
			st.mu.Unlock()
			if !ok {
				return nil, protocol.Errorf(protocol.NotFound, "object %q/%q", req.Prefix, req.Key)
			}
			return protocol.Empty{}, nil
		},
	}
	serve(t, nc, st, protocol.ObjectStorage, instance, handlers)
}

// serve subscribes one handler per operation and answers like an engine: JSON body,
// the instance header, and the error envelope with its code header on failure.
func serve(t *testing.T, nc *nats.Conn, st *store, service, instance string, handlers map[string]func([]byte) (any, *protocol.Error)) {
	t.Helper()
	// One subscription for every operation: calls of one connection are then handled in
	// the order they were sent, so a set a cancelled context interrupted in flight is
	// handled before the cleanup's delete of its key (with a subscription per operation,
	// each with its own goroutine, the delete could overtake it and the key survive).
	byOp := make(map[string]func([]byte) (any, *protocol.Error), len(handlers))
	for op, h := range handlers {
		byOp[protocol.ServiceSubject(service, op)] = h
	}
	sub, err := nc.QueueSubscribe(protocol.ServicePrefix+service+".v1.*", "q", func(m *nats.Msg) {
		h, ok := byOp[m.Subject]
		if !ok {
			return // an operation this fake does not serve: the caller sees a timeout
		}
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(protocol.HeaderInstance, instance)
		out, perr := h(m.Data)
		if perr != nil {
			reply.Header.Set(protocol.HeaderErrorCode, string(perr.Code))
			out = protocol.Envelope{Error: perr}
		}
		reply.Data, _ = json.Marshal(out)
		st.count()
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", service, err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// fixture is a broker, a client connection and its Transport.
type fixture struct {
	srv *natstest.Server
	nc  *nats.Conn
	tr  *client.Transport
}

func newFixture(t *testing.T, opts ...client.Option) *fixture {
	t.Helper()
	srv := natstest.Start(t, natstest.WithoutJetStream())
	nc := natstest.Connect(t, srv.URL())
	tr, err := client.NewTransport(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, nc: nc, tr: tr}
}

// conn opens another connection to the fixture's broker, as a second engine would.
func (f *fixture) conn(t *testing.T) *nats.Conn { return natstest.Connect(t, f.srv.URL()) }

// testConfig is a small keyvalue set-get run of count operations.
func testConfig(count int64) Config {
	cfg := DefaultConfig()
	cfg.Concurrency = 4
	cfg.Duration = 0
	cfg.Count = count
	cfg.Keys = 16
	cfg.Timeout = 5 * time.Second
	cfg.Seed = 7
	return cfg
}

// measured drops the Setup ops of a history.
func measured(h []Op) []Op {
	var out []Op
	for _, op := range h {
		if !op.Setup {
			out = append(out, op)
		}
	}
	return out
}

func contains(t *testing.T, s, want string) {
	t.Helper()
	if !strings.Contains(s, want) {
		t.Errorf("%q does not contain %q", s, want)
	}
}
