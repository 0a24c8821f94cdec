package keyvalue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	"github.com/abi-engine/engine/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const callTimeout = 10 * time.Second

// servePrimary serves the keyvalue service over store on a fresh broker and returns a
// client connection.
func servePrimary(t testing.TB, store keyvalue.Store) *nats.Conn {
	t.Helper()
	return serveService(t, keyvalue.Service(store))
}

// serveService is servePrimary for a service as given (Inline, for one); each of
// with changes the primary's configuration.
func serveService(t testing.TB, svc primaries.Service, with ...func(*primaries.Config)) *nats.Conn {
	t.Helper()
	return serveServiceOn(t, natstest.Start(t), svc, with...)
}

// serveServiceOn is serveService on a broker of the test's choosing.
func serveServiceOn(t testing.TB, srv *natstest.Server, svc primaries.Service, with ...func(*primaries.Config)) *nats.Conn {
	t.Helper()
	nc := natstest.Connect(t, srv.URL())
	cfg := primaries.Config{
		Conn: nc, InstanceID: "engine-kv", MaxConcurrent: 64, LeaseValid: func() bool { return true },
	}
	for _, w := range with {
		w(&cfg)
	}
	p, err := primaries.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close the primary: %v", err)
		}
		<-e.PoisonCtx(ctx, pid).Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := p.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	return natstest.Connect(t, srv.URL())
}

// wireStore is a keyvalue.Store that calls a primary over NATS, the way the client SDK
// does, so the contract checks the service's mapping of every operation. Like any
// client it checks keys before encoding them: JSON would turn invalid UTF-8 into U+FFFD.
type wireStore struct{ nc *nats.Conn }

func (w wireStore) call(ctx context.Context, op string, req, rep any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	m, err := w.nc.RequestWithContext(ctx, protocol.ServiceSubject(protocol.KeyValue, op), body)
	if err != nil {
		return err
	}
	if m.Header.Get(protocol.HeaderInstance) != "engine-kv" {
		return errors.New("reply without the instance header")
	}
	if m.Header.Get(protocol.HeaderErrorCode) != "" {
		var env protocol.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
			return errors.New("error reply without envelope")
		}
		return env.Error
	}
	return json.Unmarshal(m.Data, rep)
}

func (w wireStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return nil, false, err
	}
	var r protocol.KVGetReply
	err := w.call(ctx, protocol.OpGet, protocol.KVKeyRequest{Key: key}, &r)
	if err != nil || !r.Found {
		return nil, false, err
	}
	if r.Value == nil {
		return nil, true, errors.New(`found with "value": null`)
	}
	return r.Value, true, nil
}

func (w wireStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckKey(key); err != nil {
		return err
	}
	return w.call(ctx, protocol.OpSet, protocol.KVSetRequest{Key: key, Value: value, TTLSeconds: ttl.Seconds()}, &protocol.Empty{})
}

func (w wireStore) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var r protocol.KVSetReply
	err := w.call(ctx, protocol.OpSetIfNotExists, protocol.KVSetRequest{Key: key, Value: value, TTLSeconds: ttl.Seconds()}, &r)
	return r.Set, err
}

func (w wireStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var r protocol.KVDeleteReply
	err := w.call(ctx, protocol.OpDelete, protocol.KVKeyRequest{Key: key}, &r)
	return r.Deleted, err
}

func (w wireStore) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var r protocol.KVDeleteReply
	err := w.call(ctx, protocol.OpDeleteIfValueMatches, protocol.KVValueRequest{Key: key, Value: value}, &r)
	return r.Deleted, err
}

func (w wireStore) Exists(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	var r protocol.KVExistsReply
	err := w.call(ctx, protocol.OpExists, protocol.KVKeyRequest{Key: key}, &r)
	return r.Exists, err
}

func (w wireStore) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	var r protocol.KVListKeysReply
	err := w.call(ctx, protocol.OpListKeys, protocol.KVListKeysRequest{Prefix: prefix, After: after, Limit: limit}, &r)
	if err == nil && r.Keys == nil {
		return nil, false, errors.New(`"keys": null`)
	}
	return r.Keys, r.NextAfter != "", err
}

func (w wireStore) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return 0, false, err
	}
	var r protocol.KVGetTTLReply
	err := w.call(ctx, protocol.OpGetTTL, protocol.KVKeyRequest{Key: key}, &r)
	return time.Duration(r.TTLSeconds) * time.Second, r.Found, err
}

// The service passes the contract over the wire, TTLs included.
func TestContractOverTheWire(t *testing.T) {
	clock := kvtest.NewClock()
	kvtest.Run(t, func(t *testing.T) keyvalue.Store {
		return wireStore{nc: servePrimary(t, memory.New(memory.WithNow(clock.Now)))}
	}, kvtest.WithClock(clock))
}

// Bad input is refused before it reaches the store, with a message that says what was
// wrong.
func TestInvalidInputNeverReachesTheStore(t *testing.T) {
	store := &countingStore{Store: memory.New()}
	nc := servePrimary(t, store)
	for _, c := range []struct {
		op, body, want string
	}{
		{protocol.OpGet, `{"key":""}`, "key must not be empty"},
		{protocol.OpGet, `{}`, "key must not be empty"},
		{protocol.OpGet, `{"key":"` + strings.Repeat("k", 1025) + `"}`, "key is 1025 bytes long, the limit is 1024"},
		{protocol.OpExists, "{\"key\":\"a\xffb\"}", "not valid UTF-8"},
		{protocol.OpGet, `{"key":`, "not valid JSON"},
		{protocol.OpGet, `"key"`, "must be a JSON object, got a string"},
		{protocol.OpGet, `{"key":42}`, `member "key" must be a string, got a number`},
		{protocol.OpSet, `{"key":"k","value":"not base64!"}`, "not a valid base64 string"},
		{protocol.OpSet, `{"key":"k","value":{}}`, `member "value" must be a base64 string, got an object`},
		{protocol.OpSet, `{"key":"k","value":"","ttl_seconds":-1}`, "ttl_seconds must not be negative, got -1"},
		{protocol.OpSet, `{"key":"k","value":"","ttl_seconds":"10"}`, `member "ttl_seconds" must be a number, got a string`},
		{protocol.OpSetIfNotExists, `{"key":"k","value":"","ttl_seconds":-0.5}`, "ttl_seconds must not be negative"},
		{protocol.OpSetIfNotExists, `{"key":"k","value":"","ttl_seconds":1e300}`, "ttl_seconds 1e+300 is too large"},
		{protocol.OpDeleteIfValueMatches, `{"key":"","value":""}`, "key must not be empty"},
		{protocol.OpDelete, `{"key":"k","context":{"timeout_ms":"x"}}`, `member "context.timeout_ms" must be a number`},
	} {
		m, err := nc.Request(protocol.ServiceSubject(protocol.KeyValue, c.op), []byte(c.body), callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var env protocol.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
			t.Fatalf("%s %s: reply %q is not an error", c.op, c.body, m.Data)
		}
		if env.Error.Code != protocol.InvalidArgument || !strings.Contains(env.Error.Message, c.want) {
			t.Errorf("%s %.60s: %+v, want INVALID_ARGUMENT saying %q", c.op, c.body, env.Error, c.want)
		}
		if got := m.Header.Get(protocol.HeaderErrorCode); got != string(protocol.InvalidArgument) {
			t.Errorf("%s: %s = %q", c.op, protocol.HeaderErrorCode, got)
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("the store was called %d times", n)
	}
}

// A found empty value travels as "" and a missing one as found:false.
func TestGetReplyShape(t *testing.T) {
	nc := servePrimary(t, memory.New())
	req := func(op, body string) string {
		m, err := nc.Request(protocol.ServiceSubject(protocol.KeyValue, op), []byte(body), callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return string(m.Data)
	}
	if got := req(protocol.OpGet, `{"key":"k"}`); got != `{"found":false,"value":null}` {
		t.Errorf("missing: %s", got)
	}
	if got := req(protocol.OpSet, `{"key":"k"}`); got != `{}` {
		t.Errorf("set without value: %s", got)
	}
	if got := req(protocol.OpGet, `{"key":"k"}`); got != `{"found":true,"value":""}` {
		t.Errorf("empty value: %s", got)
	}
	if got := req(protocol.OpSetIfNotExists, `{"key":"k","value":"eA=="}`); got != `{"set":false}` {
		t.Errorf("set_if_not_exists: %s", got)
	}
	if got := req(protocol.OpExists, `{"key":"k","context":{"trace_id":"t","timeout_ms":5000}}`); got != `{"exists":true}` {
		t.Errorf("exists: %s", got)
	}
	if got := req(protocol.OpDelete, `{"key":"k"}`); got != `{"deleted":true}` {
		t.Errorf("delete: %s", got)
	}
}

// sharedStore is a memory store that counts its shared reads and its copying ones.
type sharedStore struct {
	*memory.Store
	shared, copies atomic.Int32
}

func (s *sharedStore) Get(ctx context.Context, k string) ([]byte, bool, error) {
	s.copies.Add(1)
	return s.Store.Get(ctx, k)
}

func (s *sharedStore) GetShared(ctx context.Context, k string) ([]byte, bool, error) {
	s.shared.Add(1)
	return s.Store.GetShared(ctx, k)
}

// A get reads a SharedReader's value without a copy; a store without the shared read
// is read with Get, through keyvalue.GetShared as well.
func TestGetReadsSharedValues(t *testing.T) {
	store := &sharedStore{Store: memory.New()}
	nc := servePrimary(t, store)
	if _, err := nc.Request(protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet), []byte(`{"key":"k","value":"dg=="}`), callTimeout); err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), []byte(`{"key":"k"}`), callTimeout)
	if err != nil || string(m.Data) != `{"found":true,"value":"dg=="}` {
		t.Fatalf("get: %q, %v", m.Data, err)
	}
	if s, c := store.shared.Load(), store.copies.Load(); s != 1 || c != 0 {
		t.Fatalf("%d shared reads and %d copies, want 1 and 0", s, c)
	}
	plain := &countingStore{Store: memory.New()}
	if _, _, err := keyvalue.GetShared(context.Background(), plain, "k"); err != nil || plain.calls.Load() != 1 {
		t.Fatalf("GetShared on a store without it: %v, %d Get calls", err, plain.calls.Load())
	}
}

// countingStore counts the calls that reach the store.
type countingStore struct {
	keyvalue.Store
	calls atomic.Int32
}

func (c *countingStore) Get(ctx context.Context, k string) ([]byte, bool, error) {
	c.calls.Add(1)
	return c.Store.Get(ctx, k)
}

func (c *countingStore) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	c.calls.Add(1)
	return c.Store.Set(ctx, k, v, ttl)
}

func (c *countingStore) SetIfNotExists(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	c.calls.Add(1)
	return c.Store.SetIfNotExists(ctx, k, v, ttl)
}

func (c *countingStore) Delete(ctx context.Context, k string) (bool, error) {
	c.calls.Add(1)
	return c.Store.Delete(ctx, k)
}

func (c *countingStore) DeleteIfValueMatches(ctx context.Context, k string, v []byte) (bool, error) {
	c.calls.Add(1)
	return c.Store.DeleteIfValueMatches(ctx, k, v)
}

func (c *countingStore) Exists(ctx context.Context, k string) (bool, error) {
	c.calls.Add(1)
	return c.Store.Exists(ctx, k)
}
