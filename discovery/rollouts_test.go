package discovery

import (
	"context"
	"testing"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// Ported from the Python service's rollout cases (docs/discovery.md "Rollouts").

// up registers id as module (major) in rollout with cohort, depending on deps, and
// reports it initialized.
func up(t *testing.T, s *Service, id, module string, major uint32, rollout string, cohort []string, deps ...string) {
	t.Helper()
	d := desc(module, deps...)
	d.ContractMajor = major
	r := regReq(id, d)
	r.RolloutId, r.RolloutModules = rollout, cohort
	if _, err := s.Register(context.Background(), r, "svc"); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	if _, err := s.Renew(context.Background(), &pb.RenewRequest{InstanceId: id, LeaseToken: token, Initialized: true}, "svc"); err != nil {
		t.Fatalf("renew %s: %v", id, err)
	}
}

func statusAt(t *testing.T, s *Service, module string, major uint32) string {
	t.Helper()
	r, err := s.GetModule(context.Background(), &pb.GetModuleRequest{ModuleId: module, ContractMajor: major})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, i := range r.GetInstances() {
		out += i.GetInstanceId() + "=" + i.GetStatus() + " "
	}
	return out
}

func want(t *testing.T, what, got, expect string) {
	t.Helper()
	if got != expect {
		t.Fatalf("%s: %q, want %q", what, got, expect)
	}
}

func TestSameRolloutReplicaJoinsAndALaterRolloutReplacesIt(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	up(t, s, "a1", "a", 1, "release-1", nil)
	up(t, s, "a2", "a", 1, "release-1", nil)
	want(t, "release-1", statusAt(t, s, "a", 1), "a1=READY a2=READY ")
	up(t, s, "a3", "a", 2, "release-2", nil)
	// Replacement is by module id, not by major.
	want(t, "release-1 after release-2", statusAt(t, s, "a", 1), "a1=DRAINING a2=DRAINING ")
	want(t, "release-2", statusAt(t, s, "a", 2), "a3=READY ")
}

func TestFirstRolloutBecomesReadyAndAMissingDependencyBlocksCutover(t *testing.T) {
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	up(t, s, "a1", "a", 1, "release-1", nil)
	want(t, "first rollout", statusAt(t, s, "a", 1), "a1=READY ")
	up(t, s, "a2", "a", 1, "release-2", nil, "missing")
	want(t, "a release waiting for a missing dependency", statusAt(t, s, "a", 1), "a1=READY a2=STAGED ")
}

func TestTheServingGenerationKeepsServingWhenItsRolloutBreaks(t *testing.T) {
	clock := &fakeClock{t: 1000}
	s := newService(t, &memoryStore{}, clock)
	ab := []string{"a", "b"}
	up(t, s, "a-old", "a", 1, "release-1", ab)
	clock.t = 1010
	up(t, s, "b-old", "b", 1, "release-1", ab)
	want(t, "release-1", statusAt(t, s, "a", 1), "a-old=READY ")
	clock.t = 1015 // a-old renews (to 1035); b-old expires at 1030
	initialize(t, s, "a-old")
	clock.t = 1031
	initialize(t, s, "a-old")
	want(t, "release-1 broken", statusAt(t, s, "a", 1), "a-old=READY ")
	up(t, s, "a-2", "a", 1, "release-1", ab)
	want(t, "a new replica of release-1", statusAt(t, s, "a", 1), "a-2=READY a-old=READY ")
	up(t, s, "a-new", "a", 1, "release-2", ab)
	up(t, s, "b-new", "b", 1, "release-2", ab)
	want(t, "release-2 complete", statusAt(t, s, "a", 1), "a-2=DRAINING a-new=READY a-old=DRAINING ")
}

func TestAnIncompleteGenerationServesUntilNoneOfItsInstancesIsLeft(t *testing.T) {
	clock := &fakeClock{t: 1000}
	s := newService(t, &memoryStore{}, clock)
	ab := []string{"a", "b"}
	up(t, s, "a-1", "a", 1, "release-1", ab) // b never comes: incomplete
	clock.t = 1005
	up(t, s, "a-2", "a", 1, "release-2", ab)
	want(t, "the oldest serves", statusAt(t, s, "a", 1), "a-1=READY a-2=STAGED ")
	clock.t = 1021 // a-1 expired at 1020
	initialize(t, s, "a-2")
	want(t, "after a-1 expired", statusAt(t, s, "a", 1), "a-2=READY ")
	up(t, s, "a-3", "a", 1, "release-1", ab)
	want(t, "a late release-1 replica", statusAt(t, s, "a", 1), "a-2=READY a-3=STAGED ")
}

func TestARolloutMayReverseADependencyBetweenTheModulesItReplaces(t *testing.T) {
	for _, order := range [][]string{{"a", "b"}, {"b", "a"}} {
		s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
		ab := []string{"a", "b"}
		up(t, s, "a-old", "a", 1, "release-1", ab, "b")
		up(t, s, "b-old", "b", 1, "release-1", ab)
		for _, m := range order {
			if m == "a" {
				up(t, s, "a-new", "a", 1, "release-2", ab)
			} else {
				up(t, s, "b-new", "b", 1, "release-2", ab, "a")
			}
		}
		want(t, "a", statusAt(t, s, "a", 1), "a-new=READY a-old=DRAINING ")
		want(t, "b", statusAt(t, s, "b", 1), "b-new=READY b-old=DRAINING ")
	}
}

func TestCyclesWithinAGenerationOrWithOneThatCanServeBesideItAreRefused(t *testing.T) {
	ctx := context.Background()
	s := newService(t, &memoryStore{}, &fakeClock{t: 1000})
	up(t, s, "a1", "a", 1, "", nil, "b")
	up(t, s, "b1", "b", 1, "", nil)
	// Within one generation (no rollout): c→a, then a replica of b requiring c closes b→c→a→b.
	up(t, s, "c1", "c", 1, "", nil, "a")
	d := desc("b", "c")
	_, err := s.Register(ctx, regReq("b2", d), "svc")
	wantCode(t, err, ErrDescriptorConflict, "") // replicas must match first
	// A rollout of b alone that would require c, which requires a, which requires b.
	r := regReq("b3", desc("b", "c"))
	r.RolloutId = "release-9"
	_, err = s.Register(ctx, r, "svc")
	wantCode(t, err, ErrDependencyCycle, "DEPENDENCY_CYCLE: Required modules form a cycle")
	// A rollout replacing a and b together may require b→a: a's old edge a→b is replaced.
	r = regReq("b4", desc("b", "a"))
	r.RolloutId, r.RolloutModules = "release-10", []string{"a", "b"}
	if _, err := s.Register(ctx, r, "svc"); err != nil {
		t.Fatalf("a rollout reversing an edge it replaces: %v", err)
	}
}
