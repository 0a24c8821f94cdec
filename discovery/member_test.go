package discovery

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testwait"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

var secret = []byte("discovery-test-secret")

func mint(t testing.TB, sub string) string {
	t.Helper()
	tok, err := servicetoken.Mint(secret, sub, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// engine is one serving engine's discovery: a store on the broker, a service, a member
// and its actor, serving.
type engine struct {
	member *Member
	svc    *Service
	store  *JetStreamStore
	sys    *actor.Engine
	pid    *actor.PID
	inbox  chan any
	ipid   *actor.PID
	nc     *nats.Conn
}

// replies is a test actor that forwards what it receives.
type replies struct{ ch chan any }

func (r *replies) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Initialized, actor.Started, actor.Stopped:
		return
	}
	r.ch <- c.Message()
}

func startEngine(t *testing.T, url, project string, lease time.Duration) *engine {
	t.Helper()
	return startEngineOn(t, url, project, lease, nil)
}

// startEngineOn is startEngine with the registry in store (the bucket when nil).
func startEngineOn(t *testing.T, url, project string, lease time.Duration, over Store) *engine {
	t.Helper()
	nc := natstest.Connect(t, url)
	ctx := context.Background()
	store, err := OpenJetStream(ctx, nc, project, 1)
	if err != nil {
		t.Fatal(err)
	}
	var used Store = store
	if over != nil {
		used = over
	}
	svc, err := New(used, Config{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMember(MemberConfig{Conn: nc, Project: project, Service: svc, Tokens: v, MaxConcurrent: 64})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{member: m, svc: svc, store: store, sys: sys, inbox: make(chan any, 16), nc: nc}
	e.ipid = sys.Spawn(func() actor.Receiver { return &replies{ch: e.inbox} }, "replies")
	e.pid = m.Spawn(sys)
	t.Cleanup(func() {
		<-sys.Poison(e.pid).Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		<-sys.Poison(e.ipid).Done()
	})
	e.tell(actors.Serve{Epoch: 1})
	if r, ok := testwait.Recv(t, e.inbox, 10*time.Second, "Accepting").(actors.Accepting); !ok || !r.On {
		t.Fatalf("serve: %#v", r)
	}
	return e
}

func (e *engine) tell(msg any) { e.sys.SendWithSender(e.pid, msg, e.ipid) }

// call sends op's request with token and decodes the reply into resp.
func call(t testing.TB, nc *nats.Conn, project, op, token string, req, resp proto.Message) {
	t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(Subject(project, op))
	msg.Data = data
	if token != "" {
		msg.Header.Set(protocol.HeaderAuthToken, token)
	}
	r, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if len(r.Header) != 0 {
		t.Fatalf("%s: a reply with headers %v", op, r.Header)
	}
	if err := proto.Unmarshal(r.Data, resp); err != nil {
		t.Fatalf("%s: reply: %v", op, err)
	}
}

func errorOf(m proto.Message) (code, message string) {
	r := m.ProtoReflect()
	e := r.Get(r.Descriptor().Fields().ByNumber(1)).Message()
	if !e.IsValid() {
		return "", ""
	}
	f := e.Descriptor().Fields()
	return e.Get(f.ByName("code")).String(), e.Get(f.ByName("message")).String()
}

func registerReq(id, module string) *pb.RegisterRequest { return regReq(id, desc(module)) }

func listAll(t testing.TB, nc *nats.Conn, project string) []*pb.Instance {
	t.Helper()
	var out []*pb.Instance
	after := ""
	for {
		var r pb.ListModulesResponse
		call(t, nc, project, OpListModules, mint(t, "api"), &pb.ListModulesRequest{Limit: 100, AfterInstanceId: after}, &r)
		if c, m := errorOf(&r); c != "" {
			t.Fatalf("list_modules: %s %s", c, m)
		}
		out = append(out, r.Instances...)
		if after = r.NextAfterInstanceId; after == "" {
			return out
		}
	}
}

// TestRefusalsWriteNothing: a missing, forged or expired token, malformed protobuf, an
// oversized request and an overflow upload are refused with the Python service's codes
// and texts, and the registry is not written.
func TestRefusalsWriteNothing(t *testing.T) {
	srv := natstest.Start(t)
	e := startEngine(t, srv.URL(), "refusals", 20*time.Second)
	nc := natstest.Connect(t, srv.URL())
	forged, _ := servicetoken.Mint([]byte("another secret"), "svc", time.Now(), time.Hour)
	expired, _ := servicetoken.Mint(secret, "svc", time.Now().Add(-2*time.Hour), time.Hour)
	good := mint(t, "svc")
	send := func(token string, data []byte, hdr map[string]string) (string, string) {
		msg := nats.NewMsg(Subject("refusals", OpRegister))
		msg.Data = data
		if token != "" {
			msg.Header.Set(protocol.HeaderAuthToken, token)
		}
		for k, v := range hdr {
			msg.Header.Set(k, v)
		}
		r, err := nc.RequestMsg(msg, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var resp pb.RegisterResponse
		if err := proto.Unmarshal(r.Data, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Instance != nil {
			t.Fatal("a refusal carries an instance")
		}
		return errorOf(&resp)
	}
	valid, _ := proto.Marshal(registerReq("i-1", "m"))
	for _, tc := range []struct {
		name, token string
		data        []byte
		hdr         map[string]string
		code, text  string
	}{
		{"no token", "", valid, nil, "UNAUTHENTICATED", "Missing or invalid service token"},
		{"forged token", forged, valid, nil, "UNAUTHENTICATED", "Missing or invalid service token"},
		{"expired token", expired, valid, nil, "UNAUTHENTICATED", "Missing or invalid service token"},
		{"not a JWT", "abc", valid, nil, "UNAUTHENTICATED", "Missing or invalid service token"},
		{"malformed protobuf", good, []byte{0x0a, 0xff, 0x01}, nil, "INVALID_ARGUMENT", "Malformed protobuf"},
		{"oversized", good, make([]byte, maxRequestBytes+1), nil, "PAYLOAD_TOO_LARGE", "Discovery request exceeds limit"},
		{"overflow upload", good, nil, map[string]string{protocol.HeaderOverflowRequest: "x:1"}, "PAYLOAD_TOO_LARGE", "Discovery request exceeds limit"},
		{"invalid descriptor", good, func() []byte { b, _ := proto.Marshal(registerReq("i/1", "m")); return b }(), nil,
			"INVALID_ARGUMENT", "INVALID_ARGUMENT: Invalid module or instance identity"},
	} {
		if code, text := send(tc.token, tc.data, tc.hdr); code != tc.code || text != tc.text {
			t.Errorf("%s: %s %q, want %s %q", tc.name, code, text, tc.code, tc.text)
		}
	}
	if data, rev, err := e.store.Read(context.Background()); err != nil || rev != 0 || len(data) != 0 {
		t.Fatalf("the registry after refusals: revision %d, %d bytes, %v; want nothing written", rev, len(data), err)
	}
	// The caller token of an authorize operation is checked too.
	var reg pb.RegisterResponse
	call(t, nc, "refusals", OpRegister, good, registerReq("p-1", "m"), &reg)
	var az pb.AuthorizeModelResponse
	call(t, nc, "refusals", OpAuthorizeModel, good, &pb.AuthorizeModelRequest{InstanceId: "p-1", LeaseToken: token, ModelName: "x", CallerToken: forged}, &az)
	if c, m := errorOf(&az); c != "UNAUTHENTICATED" || m != "Missing or invalid service token" {
		t.Fatalf("a forged caller token: %s %q", c, m)
	}
}

// TestAuthorizeNamesTheCallerAndWhetherItIsAnAdmin, as the Python NATS suite has it.
func TestAuthorizeNamesTheCallerAndWhetherItIsAnAdmin(t *testing.T) {
	srv := natstest.Start(t)
	startEngine(t, srv.URL(), "authz", 20*time.Second)
	nc := natstest.Connect(t, srv.URL())
	d := desc("m")
	d.Agents = []*pb.AgentDescriptor{{Name: "A", ContractMajor: 1, Capabilities: []string{"agent.invoke.v1"}}}
	var reg pb.RegisterResponse
	call(t, nc, "authz", OpRegister, mint(t, "svc"), regReq("p", d), &reg)
	for _, who := range []struct {
		name  string
		admin bool
	}{{"orchestrator", false}, {"api", true}} {
		var r pb.AuthorizeAgentResponse
		call(t, nc, "authz", OpAuthorizeAgent, mint(t, "svc"),
			&pb.AuthorizeAgentRequest{InstanceId: "p", LeaseToken: token, AgentName: "A", CallerToken: mint(t, who.name)}, &r)
		if c, _ := errorOf(&r); c != "" || r.CallerIdentity != who.name || r.CallerAdmin != who.admin {
			t.Fatalf("%s: %v", who.name, &r)
		}
	}
}

// TestTwoOwnersShareOneRegistry: two engines serve the queue group and write the one
// key; 4 sequential registers are handled 4 times in all, and 40 concurrent ones all
// succeed and are all listed.
func TestTwoOwnersShareOneRegistry(t *testing.T) {
	srv := natstest.Start(t)
	a := startEngine(t, srv.URL(), "two", 20*time.Second)
	b := startEngine(t, srv.URL(), "two", 20*time.Second)
	nc := natstest.Connect(t, srv.URL())
	handled := func() int { return a.svc.Writes() + b.svc.Writes() }
	for i := range 4 {
		var r pb.RegisterResponse
		call(t, nc, "two", OpRegister, mint(t, "svc"), registerReq(fmt.Sprintf("s-%d", i), "m"), &r)
		if c, m := errorOf(&r); c != "" {
			t.Fatalf("register: %s %s", c, m)
		}
	}
	if handled() != 4 {
		t.Fatalf("4 registers written %d times", handled())
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 40 {
		wg.Go(func() {
			var r pb.RegisterResponse
			call(t, nc, "two", OpRegister, mint(t, "svc"), registerReq(fmt.Sprintf("c-%02d", i), "m"), &r)
			if c, m := errorOf(&r); c != "" {
				t.Errorf("register c-%02d: %s %s", i, c, m)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := len(listAll(t, nc, "two")); failed.Load() != 0 || n != 44 {
		t.Fatalf("%d failed, %d listed; want 0 and 44", failed.Load(), n)
	}
}

// TestRestartRecoversTheRegistry: a new engine on the same bucket finds the READY
// instance under its id; an admin evicts it and it registers again under the same id.
func TestRestartRecoversTheRegistryAndEvictedInstancesRegisterAgain(t *testing.T) {
	srv := natstest.Start(t)
	first := startEngine(t, srv.URL(), "restart", 20*time.Second)
	nc := natstest.Connect(t, srv.URL())
	owner := mint(t, "research")
	var reg pb.RegisterResponse
	call(t, nc, "restart", OpRegister, owner, registerReq("r-1", "research"), &reg)
	var ren pb.RenewResponse
	call(t, nc, "restart", OpRenew, owner, &pb.RenewRequest{InstanceId: "r-1", LeaseToken: token, Initialized: true}, &ren)
	if ren.Instance.GetStatus() != StatusReady {
		t.Fatalf("renew: %v", &ren)
	}
	first.tell(actors.Stop{})
	testwait.Recv(t, first.inbox, 15*time.Second, "Down")
	startEngine(t, srv.URL(), "restart", 20*time.Second)
	var got pb.GetModuleResponse
	call(t, nc, "restart", OpGetModule, owner, &pb.GetModuleRequest{ModuleId: "research", ContractMajor: 1}, &got)
	if len(got.Instances) != 1 || got.Instances[0].InstanceId != "r-1" || got.Instances[0].Status != StatusReady {
		t.Fatalf("after the restart: %v", &got)
	}
	var ev pb.EvictResponse
	call(t, nc, "restart", OpEvict, owner, &pb.EvictRequest{InstanceId: "r-1"}, &ev)
	if c, _ := errorOf(&ev); c != "PERMISSION_DENIED" {
		t.Fatalf("evict by the module's identity: %v", &ev)
	}
	call(t, nc, "restart", OpEvict, mint(t, "api"), &pb.EvictRequest{InstanceId: "r-1"}, &ev)
	if c, _ := errorOf(&ev); c != "" || ev.Instance.GetInstanceId() != "r-1" {
		t.Fatalf("evict by api: %v", &ev)
	}
	call(t, nc, "restart", OpRenew, owner, &pb.RenewRequest{InstanceId: "r-1", LeaseToken: token}, &ren)
	if c, _ := errorOf(&ren); c != "LEASE_EXPIRED" {
		t.Fatalf("renew after the eviction: %v", &ren)
	}
	again := registerReq("r-1", "research")
	again.LeaseToken = strings.Repeat("f", 32)
	call(t, nc, "restart", OpRegister, owner, again, &reg)
	if c, m := errorOf(&reg); c != "" || reg.Instance.GetInstanceId() != "r-1" {
		t.Fatalf("register again under the same id: %s %s", c, m)
	}
}

// TestStopUnderLoadAnswersEveryCall: two engines serve list_modules to 64 senders; one
// is stopped while they send (StopAccepting, as in a handover, or Stop, as at a fence).
// Every call is answered, in each of 5 rounds.
func TestStopUnderLoadAnswersEveryCall(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	tok := mint(t, "svc")
	for round := range 5 {
		old := startEngine(t, srv.URL(), "load", 20*time.Second)
		startEngine(t, srv.URL(), "load", 20*time.Second)
		var sent, lost atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				req, _ := proto.Marshal(&pb.ListModulesRequest{Limit: 1})
				for {
					select {
					case <-stop:
						return
					default:
					}
					msg := nats.NewMsg(Subject("load", OpListModules))
					msg.Data = req
					msg.Header.Set(protocol.HeaderAuthToken, tok)
					sent.Add(1)
					r, err := nc.RequestMsg(msg, 10*time.Second)
					var resp pb.ListModulesResponse
					if err != nil || proto.Unmarshal(r.Data, &resp) != nil || resp.Error != nil {
						lost.Add(1)
					}
				}
			})
		}
		testwait.For(t, 10*time.Second, "calls flowing", func() bool { return sent.Load() > 200 })
		if round%2 == 0 { // a handover's drain
			old.tell(actors.StopAccepting{Deadline: time.Now().Add(10 * time.Second)})
			testwait.Recv(t, old.inbox, 10*time.Second, "Accepting{false}")
			testwait.Recv(t, old.inbox, 10*time.Second, "Drained")
		} else { // a fence
			old.tell(actors.Stop{})
			if _, ok := testwait.Recv(t, old.inbox, 15*time.Second, "Down").(actors.Down); !ok {
				t.Fatal("Stop not answered Down")
			}
		}
		at := sent.Load()
		testwait.For(t, 10*time.Second, "calls after the stop", func() bool { return sent.Load() > at+200 })
		close(stop)
		wg.Wait()
		if lost.Load() != 0 {
			t.Fatalf("round %d: %d of %d calls lost", round, lost.Load(), sent.Load())
		}
		if old.member.InFlight() != 0 {
			t.Fatalf("round %d: %d calls in flight after Drained", round, old.member.InFlight())
		}
	}
}

// TestADeletedBucketIsRecreated: calls fail UNAVAILABLE while the registry's bucket is
// gone, and succeed again once the engine has recreated it, without a restart.
func TestADeletedBucketIsRecreated(t *testing.T) {
	srv := natstest.Start(t)
	startEngine(t, srv.URL(), "gone", 20*time.Second)
	nc := natstest.Connect(t, srv.URL())
	tok := mint(t, "svc")
	var r pb.RegisterResponse
	call(t, nc, "gone", OpRegister, tok, registerReq("a", "m"), &r)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(context.Background(), Bucket("gone")); err != nil {
		t.Fatal(err)
	}
	call(t, nc, "gone", OpRegister, tok, registerReq("b", "m"), &r)
	if c, m := errorOf(&r); c != "UNAVAILABLE" || m != "Registry operation failed" {
		t.Fatalf("with the bucket gone: %s %q", c, m)
	}
	testwait.For(t, 15*time.Second, "a register after the bucket was recreated", func() bool {
		var r pb.RegisterResponse
		call(t, nc, "gone", OpRegister, tok, registerReq("c", "m"), &r)
		c, _ := errorOf(&r)
		return c == ""
	})
}

// heldReads is a store whose reads wait until released, counting those waiting.
type heldReads struct {
	memoryStore
	waiting atomic.Int32
	release chan struct{}
}

func (h *heldReads) Read(ctx context.Context) ([]byte, uint64, error) {
	h.waiting.Add(1)
	<-h.release
	return h.memoryStore.Read(ctx)
}

// TestLookupsAreAnsweredSideBySideAndStopWaitsForThem: three get_module calls run at
// once; a stop is not over (no Drained) until they are released, and each is answered
// once.
func TestLookupsAreAnsweredSideBySideAndStopWaitsForThem(t *testing.T) {
	srv := natstest.Start(t)
	store := &heldReads{release: make(chan struct{})}
	e := startEngineOn(t, srv.URL(), "side", 20*time.Second, store)
	others := e.nc.NumSubscriptions() - len(Operations) // the connection's request inbox
	nc := natstest.Connect(t, srv.URL())
	tok := mint(t, "svc")
	answers := make(chan string, 3)
	for range 3 {
		go func() {
			msg := nats.NewMsg(Subject("side", OpGetModule))
			msg.Data, _ = proto.Marshal(&pb.GetModuleRequest{ModuleId: "m", ContractMajor: 1})
			msg.Header.Set(protocol.HeaderAuthToken, tok)
			r, err := nc.RequestMsg(msg, 20*time.Second)
			if err != nil {
				answers <- err.Error()
				return
			}
			var resp pb.GetModuleResponse
			_ = proto.Unmarshal(r.Data, &resp)
			c, _ := errorOf(&resp)
			answers <- c
		}()
	}
	testwait.For(t, 10*time.Second, "three lookups running at once", func() bool { return store.waiting.Load() == 3 })
	e.tell(actors.StopAccepting{Deadline: time.Now().Add(15 * time.Second)})
	testwait.Recv(t, e.inbox, 10*time.Second, "Accepting{false}")
	testwait.For(t, 10*time.Second, "the drained subscriptions closed", func() bool { return e.nc.NumSubscriptions() == others })
	// Nothing may come while the three calls wait: a window to see an early Drained
	// (it can only let a wrong stop pass, never fail a right one).
	select {
	case m := <-e.inbox:
		t.Fatalf("%T before the lookups were answered", m)
	case a := <-answers:
		t.Fatalf("a lookup answered before its read was released: %s", a)
	case <-time.After(300 * time.Millisecond):
	}
	close(store.release)
	for range 3 {
		if a := testwait.Recv(t, answers, 10*time.Second, "an answer"); a != "MODULE_NOT_FOUND" {
			t.Fatalf("answer %q, want MODULE_NOT_FOUND", a)
		}
	}
	if _, ok := testwait.Recv(t, e.inbox, 10*time.Second, "Drained").(actors.Drained); !ok {
		t.Fatal("no Drained")
	}
}
