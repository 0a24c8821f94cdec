package discovery

import (
	"math"
	"regexp"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// The Python service's name rules, matched whole: a name is 1 to 256 characters, a
// rollout id empty or 1 to 128.
var (
	namePattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,255}$`)
	rolloutPattern = regexp.MustCompile(`^(?:[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127})?$`)
)

// Bounds of a descriptor, the Python service's.
const (
	maxCohort       = 64
	maxDependencies = 64
	maxAgents       = 128
	maxJobs         = 128
	maxModels       = 128
	maxCapabilities = 32
	maxTriggers     = 16
	maxDescription  = 4096
	maxVersion      = 128
	maxSpec         = 256
	maxTimeZone     = 64
	maxConcurrency  = 64
	maxAttempts     = 100
	minLeaseToken   = 32
	maxLeaseToken   = 256
	agentInvoke     = "agent.invoke.v1"
)

var triggerKinds = []string{"cron", "every", "event"}

func validName(s string) bool { return namePattern.MatchString(s) }

// chars counts as Python's len does on a str: code points.
func chars(s string) int { return utf8.RuneCountInString(s) }

// cohort is the set of modules that cut over together with req, sorted: its
// rollout_modules, else its own module when it names a rollout, else none. ok is false
// when the list breaks a rule (rule 3).
func cohort(req *pb.RegisterRequest) (out []string, ok bool) {
	mods := req.GetRolloutModules()
	switch {
	case len(mods) > 0:
		if req.GetRolloutId() == "" || len(mods) > maxCohort {
			return nil, false
		}
		out = slices.Clone(mods)
	case req.GetRolloutId() != "":
		out = []string{req.GetDescriptor_().GetModuleId()}
	default:
		return nil, true
	}
	slices.Sort(out)
	for i, m := range out {
		if !validName(m) || (i > 0 && out[i-1] == m) {
			return nil, false
		}
	}
	if !slices.Contains(out, req.GetDescriptor_().GetModuleId()) {
		return nil, false
	}
	return out, true
}

// validateRequest applies the rules of a register request that need no registry
// (rules 1 to 14, in the Python service's order), returning the sorted cohort.
func validateRequest(req *pb.RegisterRequest) ([]string, error) {
	bad := func(text string) error { return refuse(ErrInvalidArgument, text) }
	d := req.GetDescriptor_()
	if !validName(d.GetModuleId()) || !validName(req.GetInstanceId()) {
		return nil, bad(textIdentity)
	}
	if !rolloutPattern.MatchString(req.GetRolloutId()) {
		return nil, bad(textRolloutID)
	}
	members, ok := cohort(req)
	if !ok {
		return nil, bad(textRolloutModules)
	}
	if n := chars(req.GetLeaseToken()); n < minLeaseToken || n > maxLeaseToken {
		return nil, bad(textLeaseToken)
	}
	if d.GetContractMajor() == 0 || chars(d.GetPackageVersion()) > maxVersion {
		return nil, bad(textContract)
	}
	if len(d.GetDependencies()) > maxDependencies || len(d.GetAgents()) > maxAgents {
		return nil, bad(textTooMany)
	}
	deps := map[node]bool{}
	for _, dep := range d.GetDependencies() {
		n := node{dep.GetModuleId(), dep.GetContractMajor()}
		if deps[n] {
			return nil, bad(textDupDependencies)
		}
		deps[n] = true
	}
	for _, dep := range d.GetDependencies() {
		if !validName(dep.GetModuleId()) || dep.GetContractMajor() == 0 {
			return nil, bad(textDependency)
		}
	}
	if !unique(d.GetAgents(), (*pb.AgentDescriptor).GetName) {
		return nil, bad(textDupAgents)
	}
	for _, a := range d.GetAgents() {
		if !validAgent(a) {
			return nil, bad(textAgent)
		}
	}
	if len(d.GetJobs()) > maxJobs || !unique(d.GetJobs(), (*pb.JobDescriptor).GetName) {
		return nil, bad(textJobs)
	}
	for _, j := range d.GetJobs() {
		if !validJob(j) {
			return nil, bad(textJob)
		}
	}
	if len(d.GetModels()) > maxModels || !unique(d.GetModels(), (*pb.ModelDescriptor).GetName) {
		return nil, bad(textModels)
	}
	for _, m := range d.GetModels() {
		if !validName(m.GetName()) || m.GetKind() != "chat" || chars(m.GetDescription()) > maxDescription {
			return nil, bad(textModel)
		}
	}
	return members, nil
}

func unique[T any](items []T, name func(T) string) bool {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		n := name(it)
		if seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}

func validAgent(a *pb.AgentDescriptor) bool {
	if !validName(a.GetName()) || a.GetContractMajor() == 0 || chars(a.GetDescription()) > maxDescription ||
		len(a.GetCapabilities()) > maxCapabilities {
		return false
	}
	for _, c := range a.GetCapabilities() {
		if !validName(c) {
			return false
		}
	}
	return true
}

func validJob(j *pb.JobDescriptor) bool {
	t := j.GetTimeoutSeconds()
	if !validName(j.GetName()) || j.GetContractMajor() == 0 || chars(j.GetDescription()) > maxDescription ||
		j.GetMaxConcurrency() == 0 || j.GetMaxConcurrency() > maxConcurrency ||
		j.GetMaxAttempts() == 0 || j.GetMaxAttempts() > maxAttempts ||
		t < 0 || math.IsNaN(t) || math.IsInf(t, 0) || len(j.GetTriggers()) > maxTriggers {
		return false
	}
	for _, tr := range j.GetTriggers() {
		if !slices.Contains(triggerKinds, tr.GetKind()) || chars(tr.GetSpec()) < 1 || chars(tr.GetSpec()) > maxSpec ||
			chars(tr.GetTimeZone()) > maxTimeZone {
			return false
		}
	}
	return true
}

// validateAgainst applies the rules that compare the request with the live records
// (rules 15 to 17).
func validateAgainst(st *pb.RegistryState, req *pb.RegisterRequest, members []string) error {
	d := req.GetDescriptor_()
	for _, r := range st.GetRecords() {
		if req.GetRolloutId() != "" && r.GetRolloutId() == req.GetRolloutId() && !slices.Equal(sortedUnique(r.GetRolloutModules()), members) {
			return refuse(ErrDescriptorConflict, textRolloutMembers)
		}
	}
	for _, r := range st.GetRecords() {
		o := r.GetInstance().GetDescriptor_()
		if o.GetModuleId() != d.GetModuleId() || o.GetContractMajor() != d.GetContractMajor() || r.GetRolloutId() != req.GetRolloutId() {
			continue
		}
		if !equalAll(o.GetDependencies(), d.GetDependencies()) || !equalAll(o.GetAgents(), d.GetAgents()) ||
			!equalAll(o.GetJobs(), d.GetJobs()) || !equalAll(o.GetModels(), d.GetModels()) {
			return refuse(ErrDescriptorConflict, textReplicas)
		}
	}
	return refuseCycles(st, req, members)
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func equalAll[T proto.Message](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return proto.Equal(x, y) })
}
