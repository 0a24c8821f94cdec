package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// Ported from the Python service's suite: readiness follows dependencies, is lost with
// them and comes back with new replicas.
func TestReadinessDependencyLossRecoveryAndReplicas(t *testing.T) {
	clock := &fakeClock{t: 1000}
	s := newService(t, &memoryStore{}, clock)
	register(t, s, "a1", desc("a", "b"))
	register(t, s, "b1", desc("b"))
	initialize(t, s, "a1")
	if got := joined(statusOf(t, s, "a")); got != "a1=DEGRADED" {
		t.Fatalf("a before b is initialized: %s", got)
	}
	initialize(t, s, "b1")
	if got := joined(statusOf(t, s, "a")); got != "a1=READY" {
		t.Fatalf("a with b up: %s", got)
	}
	clock.t = 1015
	initialize(t, s, "a1") // a renews, b does not
	clock.t = 1021
	if got := joined(statusOf(t, s, "a")); got != "a1=DEGRADED" {
		t.Fatalf("a after b expired: %s", got)
	}
	_, err := s.Renew(context.Background(), &pb.RenewRequest{InstanceId: "b1", LeaseToken: token}, "svc")
	wantCode(t, err, ErrLeaseExpired, "LEASE_EXPIRED: Register a fresh instance after lease loss")
	register(t, s, "b2", desc("b"))
	register(t, s, "b3", desc("b"))
	initialize(t, s, "b2")
	initialize(t, s, "b3")
	if got := joined(statusOf(t, s, "b")); got != "b2=READY b3=READY" {
		t.Fatalf("b replicas: %s", got)
	}
	if got := joined(statusOf(t, s, "a")); got != "a1=READY" {
		t.Fatalf("a with new replicas of b: %s", got)
	}
}

func TestCyclesOwnershipIdempotencyAndIncompatibleContract(t *testing.T) {
	clock := &fakeClock{t: 1000}
	s := newService(t, &memoryStore{}, clock)
	ctx := context.Background()
	register(t, s, "a1", desc("a", "b"))
	register(t, s, "a1", desc("a", "b")) // a retry
	_, err := s.Register(ctx, regReq("b1", desc("b", "a")), "svc")
	wantCode(t, err, ErrDependencyCycle, "DEPENDENCY_CYCLE: Required modules form a cycle")
	_, err = s.Unregister(ctx, &pb.UnregisterRequest{InstanceId: "a1", LeaseToken: token}, "intruder")
	wantCode(t, err, ErrPermissionDenied, "PERMISSION_DENIED: Registration belongs to another lease or caller")
	_, err = s.GetModule(ctx, &pb.GetModuleRequest{ModuleId: "a", ContractMajor: 2})
	wantCode(t, err, ErrIncompatible, "INCOMPATIBLE_MODULE: a")
	_, err = s.GetModule(ctx, &pb.GetModuleRequest{ModuleId: "zz", ContractMajor: 1})
	wantCode(t, err, ErrModuleNotFound, "MODULE_NOT_FOUND: zz")
	for range 2 {
		if _, err := s.Unregister(ctx, &pb.UnregisterRequest{InstanceId: "a1", LeaseToken: token}, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.GetModule(ctx, &pb.GetModuleRequest{ModuleId: "a", ContractMajor: 1})
	wantCode(t, err, ErrModuleNotFound, "")
}

func TestContentionRetriesAndPagesDoNotExposeCredentials(t *testing.T) {
	store := &memoryStore{}
	s := newService(t, store, &fakeClock{t: 1000})
	ctx := context.Background()
	register(t, s, "a", desc("m"))
	store.conflicts = 2
	register(t, s, "b", desc("m"))
	register(t, s, "c", desc("m"))
	p1, err := s.ListModules(ctx, &pb.ListModulesRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.ListModules(ctx, &pb.ListModulesRequest{Limit: 2, AfterInstanceId: p1.GetNextAfterInstanceId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Instances) != 2 || p1.NextAfterInstanceId != "b" || len(p2.Instances) != 1 || p2.Instances[0].InstanceId != "c" || p2.NextAfterInstanceId != "" {
		t.Fatalf("pages %v then %v", p1, p2)
	}
	for _, p := range []proto.Message{p1, p2} {
		b, _ := proto.Marshal(p)
		if bytes.Contains(b, []byte("svc")) || bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(leaseHash(token))) {
			t.Fatal("a page carries the owner, the lease token or its hash")
		}
	}
	for _, limit := range []uint32{0, 101} {
		_, err = s.ListModules(ctx, &pb.ListModulesRequest{Limit: limit})
		wantCode(t, err, ErrInvalidArgument, "INVALID_ARGUMENT: Page size must be 1..100")
	}
	_, err = s.Register(ctx, regReq("d", desc("bad.*")), "svc")
	wantCode(t, err, ErrInvalidArgument, "INVALID_ARGUMENT: Invalid module or instance identity")
}

func TestRegisterRetryDoesNotExtendLease(t *testing.T) {
	clock := &fakeClock{t: 1000}
	s := newService(t, &memoryStore{}, clock)
	first := register(t, s, "a", desc("m"))
	clock.t = 1015
	r, err := s.Register(context.Background(), regReq("a", desc("m")), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if r.Instance.ExpiresAt != first.ExpiresAt || r.LeaseSeconds != 5 {
		t.Fatalf("retry: expires %v (first %v), lease_seconds %v, want the same expiry and 5", r.Instance.ExpiresAt, first.ExpiresAt, r.LeaseSeconds)
	}
	changed := desc("m")
	changed.PackageVersion = "2.0"
	_, err = s.Register(context.Background(), regReq("a", changed), "svc")
	wantCode(t, err, ErrDescriptorConflict, "DESCRIPTOR_CONFLICT: Registration identity cannot change")
	other := regReq("a", desc("m"))
	other.LeaseToken = "ffffffffffffffffffffffffffffffff"
	_, err = s.Register(context.Background(), other, "svc")
	wantCode(t, err, ErrPermissionDenied, "")
}

func TestAgentAndModelAuthorization(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	ctx := context.Background()
	d := desc("m")
	d.Agents = []*pb.AgentDescriptor{{Name: "Researcher", ContractMajor: 1, Capabilities: []string{"agent.invoke.v1"}}}
	d.Models = []*pb.ModelDescriptor{{Name: "chat-1", Kind: "chat"}}
	register(t, s, "p", d)
	agent := &pb.AuthorizeAgentRequest{InstanceId: "p", LeaseToken: token, AgentName: "Researcher", NewInvocation: true}
	model := &pb.AuthorizeModelRequest{InstanceId: "p", LeaseToken: token, ModelName: "chat-1"}
	wantCode(t, s.AuthorizeAgent(ctx, agent, "svc"), ErrModuleUnavailable, "MODULE_UNAVAILABLE: Provider is not ready")
	wantCode(t, s.AuthorizeModel(ctx, model, "svc"), ErrModuleUnavailable, "MODULE_UNAVAILABLE: Provider is not ready")
	initialize(t, s, "p")
	if err := s.AuthorizeAgent(ctx, agent, "svc"); err != nil {
		t.Fatal(err)
	}
	if err := s.AuthorizeModel(ctx, model, "svc"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.AuthorizeAgent(ctx, agent, "other"), ErrPermissionDenied, "")
	wrong := proto.Clone(agent).(*pb.AuthorizeAgentRequest)
	wrong.LeaseToken = "ffffffffffffffffffffffffffffffff"
	wantCode(t, s.AuthorizeAgent(ctx, wrong, "svc"), ErrPermissionDenied, "")
	wrong.LeaseToken, wrong.AgentName = token, "Nobody"
	wantCode(t, s.AuthorizeAgent(ctx, wrong, "svc"), ErrAgentNotFound, "AGENT_NOT_FOUND: Nobody")
	model.ModelName = "other"
	wantCode(t, s.AuthorizeModel(ctx, model, "svc"), ErrModelNotFound, "MODEL_NOT_FOUND: other")
	agent.InstanceId = "gone"
	wantCode(t, s.AuthorizeAgent(ctx, agent, "svc"), ErrLeaseExpired, "LEASE_EXPIRED: Provider registration expired")
}

// Polls are accepted from a snapshot under a second old, never refused from it.
func TestAgentPollsAreAuthorizedFromARecentSnapshot(t *testing.T) {
	store := &memoryStore{}
	clock := &fakeClock{t: 1000}
	s := newService(t, store, clock)
	ctx := context.Background()
	d := desc("m")
	d.Agents = []*pb.AgentDescriptor{{Name: "A", ContractMajor: 1, Capabilities: []string{"agent.invoke.v1"}}}
	register(t, s, "p", d)
	initialize(t, s, "p")
	poll := &pb.AuthorizeAgentRequest{InstanceId: "p", LeaseToken: token, AgentName: "A"}
	before := store.reads
	for range 50 {
		if err := s.AuthorizeAgent(ctx, poll, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	if store.reads != before {
		t.Fatalf("50 polls made %d reads, want 0", store.reads-before)
	}
	submit := proto.Clone(poll).(*pb.AuthorizeAgentRequest)
	submit.NewInvocation = true
	if err := s.AuthorizeAgent(ctx, submit, "svc"); err != nil || store.reads != before+1 {
		t.Fatalf("a submit: %v, %d reads, want 1", err, store.reads-before)
	}
	clock.t += 1
	if err := s.AuthorizeAgent(ctx, poll, "svc"); err != nil || store.reads != before+2 {
		t.Fatalf("a poll a second later: %v, %d reads, want a read", err, store.reads-before)
	}
	bad := proto.Clone(poll).(*pb.AuthorizeAgentRequest)
	bad.AgentName = "B"
	for range 3 {
		wantCode(t, s.AuthorizeAgent(ctx, bad, "svc"), ErrAgentNotFound, "")
	}
	if store.reads != before+5 {
		t.Fatalf("3 refusals made %d reads, want 3 (each checked again)", store.reads-before-2)
	}
}

func TestEvictIsForAdminsAndTheOwnerRegistersAgain(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	ctx := context.Background()
	register(t, s, "r-1", desc("research"))
	_, err := s.Evict(ctx, &pb.EvictRequest{InstanceId: "r-1"}, "research")
	wantCode(t, err, ErrPermissionDenied, "PERMISSION_DENIED: Only platform administrators can evict registrations")
	for _, id := range []string{"", "a/b"} {
		_, err = s.Evict(ctx, &pb.EvictRequest{InstanceId: id}, "api")
		wantCode(t, err, ErrInvalidArgument, "INVALID_ARGUMENT: Invalid instance identity")
	}
	r, err := s.Evict(ctx, &pb.EvictRequest{InstanceId: "r-1"}, "api")
	if err != nil || r.Instance.InstanceId != "r-1" || r.Instance.Status != StatusStarting {
		t.Fatalf("evict by api: %v, %v", r, err)
	}
	_, err = s.Evict(ctx, &pb.EvictRequest{InstanceId: "r-1"}, "engine")
	wantCode(t, err, ErrInstanceNotFound, "INSTANCE_NOT_FOUND: r-1")
	_, err = s.Renew(ctx, &pb.RenewRequest{InstanceId: "r-1", LeaseToken: token}, "svc")
	wantCode(t, err, ErrLeaseExpired, "")
	again := regReq("r-1", desc("research"))
	again.LeaseToken = "ffffffffffffffffffffffffffffffff"
	if _, err := s.Register(ctx, again, "svc"); err != nil {
		t.Fatalf("register again under the same id: %v", err)
	}
	if _, err := New(&memoryStore{}, Config{Lease: 20e9, Admins: []string{""}}); err == nil {
		t.Fatal("an empty admin identity was accepted")
	}
}

// A rollout stays STAGED until its cohort is up, then the previous generation drains.
func TestRolloutWaitsForTheCohortThenDrainsThePreviousGeneration(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	ctx := context.Background()
	in := func(id, module, rollout string, deps ...string) {
		t.Helper()
		r := regReq(id, desc(module, deps...))
		r.RolloutId, r.RolloutModules = rollout, []string{"a", "b"}
		if _, err := s.Register(ctx, r, "svc"); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		initialize(t, s, id)
	}
	in("a-old", "a", "release-1", "b")
	in("b-old", "b", "release-1")
	if got := joined(statusOf(t, s, "a")); got != "a-old=READY" {
		t.Fatalf("first rollout: %s", got)
	}
	in("a-new", "a", "release-2", "b")
	if got := joined(statusOf(t, s, "a")); got != "a-new=STAGED a-old=READY" {
		t.Fatalf("half of release-2 up: %s", got)
	}
	in("b-new", "b", "release-2")
	if got := joined(statusOf(t, s, "a")) + " " + joined(statusOf(t, s, "b")); got != "a-new=READY a-old=DRAINING b-new=READY b-old=DRAINING" {
		t.Fatalf("release-2 complete: %s", got)
	}
	bad := regReq("c", desc("c"))
	bad.RolloutId = "not valid"
	_, err := s.Register(ctx, bad, "svc")
	wantCode(t, err, ErrInvalidArgument, "INVALID_ARGUMENT: Invalid rollout id")
	mismatch := regReq("a-3", desc("a", "b"))
	mismatch.RolloutId, mismatch.RolloutModules = "release-2", []string{"a"}
	_, err = s.Register(ctx, mismatch, "svc")
	wantCode(t, err, ErrDescriptorConflict, "DESCRIPTOR_CONFLICT: Rollout members do not match")
}

func TestReplicasMustDeclareIdenticalDescriptors(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	job := func(spec string) *pb.ModuleDescriptor {
		d := desc("m")
		d.Jobs = []*pb.JobDescriptor{{Name: "j", ContractMajor: 1, MaxConcurrency: 1, MaxAttempts: 1,
			Triggers: []*pb.JobTrigger{{Kind: "cron", Spec: spec}}}}
		return d
	}
	register(t, s, "m1", job("0 0 * * * *"))
	_, err := s.Register(context.Background(), regReq("m2", job("0 5 * * * *")), "svc")
	wantCode(t, err, ErrDescriptorConflict, "DESCRIPTOR_CONFLICT: "+textReplicas)
}

// Mutations that arrive while a write is in flight share the next one.
func TestMutationsThatArriveTogetherShareOneWrite(t *testing.T) {
	store := &memoryStore{gate: make(chan struct{})}
	s := newService(t, store, &fakeClock{t: 1000})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	wg.Go(func() {
		_, err := s.Register(context.Background(), regReq("i-0", desc("m")), "svc")
		errs <- err
	})
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writing && len(s.pending) == 0 })
	for i := 1; i < 20; i++ {
		wg.Go(func() {
			_, err := s.Register(context.Background(), regReq(fmt.Sprintf("i-%d", i), desc("m")), "svc")
			errs <- err
		})
	}
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pending) == 19 })
	close(store.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Writes() != 2 || len(statusOf(t, s, "m")) != 20 {
		t.Fatalf("%d writes, %d listed; want 2 and 20", s.Writes(), len(statusOf(t, s, "m")))
	}
}

func TestAMutationThatFailsLeavesTheOthersWritten(t *testing.T) {
	store := &memoryStore{gate: make(chan struct{})}
	s := newService(t, store, &fakeClock{t: 1000})
	done := make(chan error, 5)
	go func() { _, err := s.Register(context.Background(), regReq("first", desc("m")), "svc"); done <- err }()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writing })
	for _, id := range []string{"a", "bad/id", "b", "c"} {
		go func() { _, err := s.Register(context.Background(), regReq(id, desc("m")), "svc"); done <- err }()
	}
	close(store.gate)
	var bad int
	for range 5 {
		if err := <-done; err != nil {
			wantCode(t, err, ErrInvalidArgument, "")
			bad++
		}
	}
	if bad != 1 || joined(statusOf(t, s, "m")) != "a=STARTING b=STARTING c=STARTING first=STARTING" {
		t.Fatalf("%d refused; listed %v", bad, statusOf(t, s, "m"))
	}
}

func TestBusyAfterFiveConflictsAndOutagesFailEveryMutation(t *testing.T) {
	store := &memoryStore{conflicts: 5}
	s := newService(t, store, &fakeClock{t: 1000})
	_, err := s.Register(context.Background(), regReq("a", desc("m")), "svc")
	wantCode(t, err, ErrRegistryBusy, "REGISTRY_BUSY: Concurrent registry updates; retry control operation")
	store.conflicts = 4
	register(t, s, "a", desc("m"))
	store.failRead = errors.New("broker away")
	_, err = s.Register(context.Background(), regReq("b", desc("m")), "svc")
	if err == nil || errors.As(err, new(*Error)) {
		t.Fatalf("store outage: %v, want the store's error (UNAVAILABLE at the wire)", err)
	}
}

// A registry written by another implementation with fields this one does not know
// (a future field of RegistryRecord and of RegistryState) is updated without losing them.
func TestUnknownFieldsAreKept(t *testing.T) {
	rec := &pb.RegistryRecord{Owner: "svc", LeaseHash: leaseHash(token), RegisteredAt: 1000,
		Instance: &pb.Instance{Descriptor_: desc("m"), InstanceId: "old", ExpiresAt: 1020}}
	b, _ := proto.Marshal(rec)
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendString(b, "future-record-field")
	var st []byte
	st = protowire.AppendTag(st, 1, protowire.BytesType)
	st = protowire.AppendBytes(st, b)
	st = protowire.AppendTag(st, 77, protowire.VarintType)
	st = protowire.AppendVarint(st, 5)
	store := &memoryStore{data: st, rev: 1}
	s := newService(t, store, &fakeClock{t: 1001})
	register(t, s, "new", desc("m"))
	if !bytes.Contains(store.data, []byte("future-record-field")) {
		t.Fatal("the record's unknown field was lost")
	}
	var back pb.RegistryState
	if err := proto.Unmarshal(store.data, &back); err != nil || len(back.ProtoReflect().GetUnknown()) == 0 || len(back.Records) != 2 {
		t.Fatalf("after the write: %v, unknown %x, %d records", err, back.ProtoReflect().GetUnknown(), len(back.Records))
	}
}

// A mutation whose caller gave up before a writer took it is dropped; the others are
// written.
func TestAMutationCancelledBeforeItIsWrittenIsDropped(t *testing.T) {
	store := &memoryStore{gate: make(chan struct{})}
	s := newService(t, store, &fakeClock{t: 1000})
	first := make(chan error, 1)
	go func() { _, err := s.Register(context.Background(), regReq("first", desc("m")), "svc"); first <- err }()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writing && len(s.pending) == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	dropped := make(chan error, 1)
	go func() { _, err := s.Register(ctx, regReq("dropped", desc("m")), "svc"); dropped <- err }()
	kept := make(chan error, 1)
	go func() { _, err := s.Register(context.Background(), regReq("kept", desc("m")), "svc"); kept <- err }()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pending) == 2 })
	cancel()
	if err := <-dropped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller: %v", err)
	}
	close(store.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	if got := joined(statusOf(t, s, "m")); got != "first=STARTING kept=STARTING" {
		t.Fatalf("listed %s, want first and kept only", got)
	}
}

// A store that fails fails every mutation of the batch waiting on it.
func TestARegistryOutageFailsEveryMutationWaitingOnIt(t *testing.T) {
	store := &memoryStore{gate: make(chan struct{})}
	s := newService(t, store, &fakeClock{t: 1000})
	errs := make(chan error, 6)
	go func() { _, err := s.Register(context.Background(), regReq("first", desc("m")), "svc"); errs <- err }()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writing })
	for i := range 5 {
		go func() {
			_, err := s.Register(context.Background(), regReq(fmt.Sprintf("w-%d", i), desc("m")), "svc")
			errs <- err
		}()
	}
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pending) == 5 })
	store.mu.Lock()
	store.failRead = errors.New("broker away")
	store.mu.Unlock()
	close(store.gate)
	failed := 0
	for range 6 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 5 {
		t.Fatalf("%d of the 5 waiting mutations failed, want all", failed)
	}
}
