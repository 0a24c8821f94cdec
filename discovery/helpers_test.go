package discovery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/testwait"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

const token = "0123456789abcdef0123456789abcdef"

// fakeClock is a wall clock the test moves.
type fakeClock struct{ t float64 }

func (c *fakeClock) now() float64 { return c.t }

func newService(t *testing.T, store Store, clock *fakeClock) *Service {
	t.Helper()
	s, err := New(store, Config{Lease: 20 * time.Second, Clock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// desc is a descriptor of module at major 1 requiring deps (each at major 1).
func desc(module string, deps ...string) *pb.ModuleDescriptor {
	d := &pb.ModuleDescriptor{ModuleId: module, ContractMajor: 1, PackageVersion: "1.0"}
	for _, dep := range deps {
		d.Dependencies = append(d.Dependencies, &pb.Dependency{ModuleId: dep, ContractMajor: 1})
	}
	return d
}

func regReq(id string, d *pb.ModuleDescriptor) *pb.RegisterRequest {
	return &pb.RegisterRequest{Descriptor_: d, InstanceId: id, LeaseToken: token}
}

func register(t *testing.T, s *Service, id string, d *pb.ModuleDescriptor) *pb.Instance {
	t.Helper()
	r, err := s.Register(context.Background(), regReq(id, d), "svc")
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return r.GetInstance()
}

func initialize(t *testing.T, s *Service, id string) *pb.Instance {
	t.Helper()
	r, err := s.Renew(context.Background(), &pb.RenewRequest{InstanceId: id, LeaseToken: token, Initialized: true}, "svc")
	if err != nil {
		t.Fatalf("renew %s: %v", id, err)
	}
	return r.GetInstance()
}

func statusOf(t *testing.T, s *Service, module string) []string {
	t.Helper()
	r, err := s.GetModule(context.Background(), &pb.GetModuleRequest{ModuleId: module, ContractMajor: 1})
	if err != nil {
		t.Fatalf("get_module %s: %v", module, err)
	}
	var out []string
	for _, i := range r.GetInstances() {
		out = append(out, i.GetInstanceId()+"="+i.GetStatus())
	}
	return out
}

// wantCode fails unless err is a registry Error of code whose message is want
// ("<CODE>: <text>"), or, with want "", any text.
func wantCode(t *testing.T, err error, code *Error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, code) {
		t.Fatalf("error %v, want %s", err, code.Code)
	}
	if want != "" && err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

func joined(s []string) string { return strings.Join(s, " ") }

// waitFor waits until cond holds (internal/testwait), failing after a generous bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the writer's state", cond)
}
