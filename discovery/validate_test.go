package discovery

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// TestValidationRules: every rule of a register request, in the Python service's order,
// refuses with its exact message and writes nothing.
func TestValidationRules(t *testing.T) {
	agent := func(mod func(a *pb.AgentDescriptor)) func(r *pb.RegisterRequest) {
		return func(r *pb.RegisterRequest) {
			a := &pb.AgentDescriptor{Name: "A", ContractMajor: 1, Capabilities: []string{"agent.invoke.v1"}}
			mod(a)
			r.Descriptor_.Agents = []*pb.AgentDescriptor{a}
		}
	}
	job := func(mod func(j *pb.JobDescriptor)) func(r *pb.RegisterRequest) {
		return func(r *pb.RegisterRequest) {
			j := &pb.JobDescriptor{Name: "j", ContractMajor: 1, MaxConcurrency: 1, MaxAttempts: 1,
				Triggers: []*pb.JobTrigger{{Kind: "every", Spec: "1h"}}}
			mod(j)
			r.Descriptor_.Jobs = []*pb.JobDescriptor{j}
		}
	}
	model := func(mod func(m *pb.ModelDescriptor)) func(r *pb.RegisterRequest) {
		return func(r *pb.RegisterRequest) {
			m := &pb.ModelDescriptor{Name: "m", Kind: "chat"}
			mod(m)
			r.Descriptor_.Models = []*pb.ModelDescriptor{m}
		}
	}
	long := strings.Repeat("x", 4097)
	const (
		identity = "INVALID_ARGUMENT: Invalid module or instance identity"
		rollout  = "INVALID_ARGUMENT: Invalid rollout id"
		members  = "INVALID_ARGUMENT: Invalid rollout modules"
		lease    = "INVALID_ARGUMENT: Lease token must contain 32 to 256 characters"
		contract = "INVALID_ARGUMENT: Invalid contract or package version"
		tooMany  = "INVALID_ARGUMENT: Too many dependencies or agents"
		dupDeps  = "INVALID_ARGUMENT: Duplicate dependencies"
		badDep   = "INVALID_ARGUMENT: Invalid dependency"
		dupAgent = "INVALID_ARGUMENT: Duplicate agents"
		badAgent = "INVALID_ARGUMENT: Invalid agent descriptor"
		jobs     = "INVALID_ARGUMENT: Too many or duplicate jobs"
		badJob   = "INVALID_ARGUMENT: Invalid job descriptor"
		models   = "INVALID_ARGUMENT: Too many or duplicate models"
		badModel = "INVALID_ARGUMENT: Invalid model descriptor"
	)
	cases := []struct {
		name string
		mod  func(r *pb.RegisterRequest)
		want string
	}{
		{"1 module id pattern", func(r *pb.RegisterRequest) { r.Descriptor_.ModuleId = "a.*" }, identity},
		{"1 module id leading dot", func(r *pb.RegisterRequest) { r.Descriptor_.ModuleId = ".a" }, identity},
		{"1 module id 257 characters", func(r *pb.RegisterRequest) { r.Descriptor_.ModuleId = strings.Repeat("a", 257) }, identity},
		{"1 empty instance id", func(r *pb.RegisterRequest) { r.InstanceId = "" }, identity},
		{"1 instance id with a slash", func(r *pb.RegisterRequest) { r.InstanceId = "a/b" }, identity},
		{"2 rollout id with a space", func(r *pb.RegisterRequest) { r.RolloutId = "not valid" }, rollout},
		{"2 rollout id 129 characters", func(r *pb.RegisterRequest) { r.RolloutId = strings.Repeat("r", 129) }, rollout},
		{"3 modules without a rollout id", func(r *pb.RegisterRequest) { r.RolloutModules = []string{"m"} }, members},
		{"3 65 modules", func(r *pb.RegisterRequest) {
			r.RolloutId = "r"
			for i := range 65 {
				r.RolloutModules = append(r.RolloutModules, "m"+strings.Repeat("x", i))
			}
		}, members},
		{"3 a duplicate module", func(r *pb.RegisterRequest) { r.RolloutId, r.RolloutModules = "r", []string{"m", "m"} }, members},
		{"3 a bad module name", func(r *pb.RegisterRequest) { r.RolloutId, r.RolloutModules = "r", []string{"m", "b*"} }, members},
		{"3 the module outside its cohort", func(r *pb.RegisterRequest) { r.RolloutId, r.RolloutModules = "r", []string{"other"} }, members},
		{"4 lease token of 31", func(r *pb.RegisterRequest) { r.LeaseToken = strings.Repeat("t", 31) }, lease},
		{"4 lease token of 257", func(r *pb.RegisterRequest) { r.LeaseToken = strings.Repeat("t", 257) }, lease},
		{"5 contract major 0", func(r *pb.RegisterRequest) { r.Descriptor_.ContractMajor = 0 }, contract},
		{"5 package version of 129", func(r *pb.RegisterRequest) { r.Descriptor_.PackageVersion = strings.Repeat("v", 129) }, contract},
		{"6 65 dependencies", func(r *pb.RegisterRequest) {
			for i := range 65 {
				r.Descriptor_.Dependencies = append(r.Descriptor_.Dependencies, &pb.Dependency{ModuleId: "d", ContractMajor: uint32(i + 1)})
			}
		}, tooMany},
		{"6 129 agents", func(r *pb.RegisterRequest) {
			for range 129 {
				r.Descriptor_.Agents = append(r.Descriptor_.Agents, &pb.AgentDescriptor{Name: "a", ContractMajor: 1})
			}
		}, tooMany},
		{"7 duplicate dependencies", func(r *pb.RegisterRequest) {
			r.Descriptor_.Dependencies = []*pb.Dependency{{ModuleId: "d", ContractMajor: 1}, {ModuleId: "d", ContractMajor: 1}}
		}, dupDeps},
		{"8 dependency name", func(r *pb.RegisterRequest) {
			r.Descriptor_.Dependencies = []*pb.Dependency{{ModuleId: "d*", ContractMajor: 1}}
		}, badDep},
		{"8 dependency major 0", func(r *pb.RegisterRequest) { r.Descriptor_.Dependencies = []*pb.Dependency{{ModuleId: "d"}} }, badDep},
		{"9 duplicate agents", func(r *pb.RegisterRequest) {
			r.Descriptor_.Agents = []*pb.AgentDescriptor{{Name: "a", ContractMajor: 1}, {Name: "a", ContractMajor: 1}}
		}, dupAgent},
		{"10 agent name", agent(func(a *pb.AgentDescriptor) { a.Name = "" }), badAgent},
		{"10 agent major 0", agent(func(a *pb.AgentDescriptor) { a.ContractMajor = 0 }), badAgent},
		{"10 agent description", agent(func(a *pb.AgentDescriptor) { a.Description = long }), badAgent},
		{"10 33 capabilities", agent(func(a *pb.AgentDescriptor) { a.Capabilities = make([]string, 33) }), badAgent},
		{"10 capability name", agent(func(a *pb.AgentDescriptor) { a.Capabilities = []string{"bad cap"} }), badAgent},
		{"11 129 jobs", func(r *pb.RegisterRequest) {
			for i := range 129 {
				r.Descriptor_.Jobs = append(r.Descriptor_.Jobs, &pb.JobDescriptor{Name: "j" + strings.Repeat("x", i)})
			}
		}, jobs},
		{"11 duplicate jobs", func(r *pb.RegisterRequest) { r.Descriptor_.Jobs = []*pb.JobDescriptor{{Name: "j"}, {Name: "j"}} }, jobs},
		{"12 job name", job(func(j *pb.JobDescriptor) { j.Name = "j j" }), badJob},
		{"12 job major 0", job(func(j *pb.JobDescriptor) { j.ContractMajor = 0 }), badJob},
		{"12 job description", job(func(j *pb.JobDescriptor) { j.Description = long }), badJob},
		{"12 concurrency 0", job(func(j *pb.JobDescriptor) { j.MaxConcurrency = 0 }), badJob},
		{"12 concurrency 65", job(func(j *pb.JobDescriptor) { j.MaxConcurrency = 65 }), badJob},
		{"12 attempts 0", job(func(j *pb.JobDescriptor) { j.MaxAttempts = 0 }), badJob},
		{"12 attempts 101", job(func(j *pb.JobDescriptor) { j.MaxAttempts = 101 }), badJob},
		{"12 negative timeout", job(func(j *pb.JobDescriptor) { j.TimeoutSeconds = -1 }), badJob},
		{"12 infinite timeout", job(func(j *pb.JobDescriptor) { j.TimeoutSeconds = math.Inf(1) }), badJob},
		{"12 NaN timeout", job(func(j *pb.JobDescriptor) { j.TimeoutSeconds = math.NaN() }), badJob},
		{"12 17 triggers", job(func(j *pb.JobDescriptor) {
			for range 16 {
				j.Triggers = append(j.Triggers, &pb.JobTrigger{Kind: "every", Spec: "1h"})
			}
		}), badJob},
		{"12 kind weekly", job(func(j *pb.JobDescriptor) { j.Triggers[0].Kind = "weekly" }), badJob},
		{"12 empty spec", job(func(j *pb.JobDescriptor) { j.Triggers[0].Spec = "" }), badJob},
		{"12 spec of 257", job(func(j *pb.JobDescriptor) { j.Triggers[0].Spec = strings.Repeat("s", 257) }), badJob},
		{"12 time zone of 65", job(func(j *pb.JobDescriptor) { j.Triggers[0].TimeZone = strings.Repeat("z", 65) }), badJob},
		{"13 129 models", func(r *pb.RegisterRequest) {
			for i := range 129 {
				r.Descriptor_.Models = append(r.Descriptor_.Models, &pb.ModelDescriptor{Name: "m" + strings.Repeat("x", i), Kind: "chat"})
			}
		}, models},
		{"13 duplicate models", func(r *pb.RegisterRequest) {
			r.Descriptor_.Models = []*pb.ModelDescriptor{{Name: "m", Kind: "chat"}, {Name: "m", Kind: "chat"}}
		}, models},
		{"14 model name", model(func(m *pb.ModelDescriptor) { m.Name = "" }), badModel},
		{"14 model kind", model(func(m *pb.ModelDescriptor) { m.Kind = "embedding" }), badModel},
		{"14 model description", model(func(m *pb.ModelDescriptor) { m.Description = long }), badModel},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &memoryStore{}
			s := newService(t, store, &fakeClock{t: 1000})
			r := regReq("i-1", desc("m"))
			tc.mod(r)
			_, err := s.Register(context.Background(), r, "svc")
			wantCode(t, err, ErrInvalidArgument, tc.want)
			if store.cas != 0 || store.data != nil {
				t.Fatalf("a refused register wrote %d times", store.cas)
			}
		})
	}
	// The accepted edges of the same rules: nothing above refuses a valid request.
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	r := regReq(strings.Repeat("i", 256), desc(strings.Repeat("m", 256)))
	r.LeaseToken, r.RolloutId = strings.Repeat("t", 256), strings.Repeat("r", 128)
	r.Descriptor_.PackageVersion = strings.Repeat("v", 128)
	job(func(j *pb.JobDescriptor) {
		j.MaxConcurrency, j.MaxAttempts, j.TimeoutSeconds = 64, 100, 0
		j.Triggers = []*pb.JobTrigger{{Kind: "cron", Spec: "0 0 * * * *", TimeZone: "Europe/Paris", Filter: "not checked"}}
	})(r)
	if _, err := s.Register(context.Background(), r, "svc"); err != nil {
		t.Fatalf("the largest valid values: %v", err)
	}
	// A 4096-character description counts characters, not bytes.
	r2 := regReq("i-2", desc("m2"))
	agent(func(a *pb.AgentDescriptor) { a.Description = strings.Repeat("é", 4096) })(r2)
	if _, err := s.Register(context.Background(), proto.Clone(r2).(*pb.RegisterRequest), "svc"); err != nil {
		t.Fatalf("4096 two-byte characters: %v", err)
	}
}

// TestRegistryLimits: 256 live instances, and a snapshot of at most 512 KiB.
func TestRegistryLimits(t *testing.T) {
	store := &memoryStore{}
	s := newService(t, store, &fakeClock{t: 1000})
	for i := range MaxLiveInstances {
		register(t, s, "i-"+strconv.Itoa(i), desc("m"))
	}
	_, err := s.Register(context.Background(), regReq("one-more", desc("m")), "svc")
	wantCode(t, err, ErrRegistryFull, "REGISTRY_FULL: Registry supports at most 256 live instances")

	s = newService(t, &memoryStore{}, &fakeClock{t: 1000})
	big := func(id string) *pb.RegisterRequest {
		r := regReq(id, desc("big"+id))
		for i := range 128 {
			r.Descriptor_.Agents = append(r.Descriptor_.Agents, &pb.AgentDescriptor{Name: "a" + strconv.Itoa(i), ContractMajor: 1, Description: strings.Repeat("d", 4096)})
		}
		return r
	}
	var refused error
	for i := range 2 {
		if _, err := s.Register(context.Background(), big(strconv.Itoa(i)), "svc"); err != nil {
			refused = err
			break
		}
	}
	wantCode(t, refused, ErrRegistryFull, "REGISTRY_FULL: Registry snapshot exceeds 512 KiB")
}
