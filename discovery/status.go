package discovery

import (
	"cmp"
	"math"
	"slices"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// The computed statuses of an instance.
const (
	StatusStarting = "STARTING"
	StatusReady    = "READY"
	StatusDegraded = "DEGRADED"
	StatusStaged   = "STAGED"
	StatusDraining = "DRAINING"
)

// node is a contract: a module at a major.
type node struct {
	module string
	major  uint32
}

func nodeOf(r *pb.RegistryRecord) node {
	d := r.GetInstance().GetDescriptor_()
	return node{d.GetModuleId(), d.GetContractMajor()}
}

func depsOf(d *pb.ModuleDescriptor) []node {
	out := make([]node, 0, len(d.GetDependencies()))
	for _, dep := range d.GetDependencies() {
		out = append(out, node{dep.GetModuleId(), dep.GetContractMajor()})
	}
	return out
}

// usable is a record that can satisfy the dependencies of a rollout: initialized and
// not draining.
func usable(r *pb.RegistryRecord) bool { return r.GetInitialized() && !r.GetDraining() }

// generation is a rollout's place in time: its first registration, then its id. Records
// without a rollout id, and rollouts with no member left, come first (start −∞).
type generation struct {
	start float64
	id    string
}

func (g generation) compare(o generation) int {
	if c := cmp.Compare(g.start, o.start); c != 0 {
		return c
	}
	return cmp.Compare(g.id, o.id)
}

// ready computes every record's status in place (Instance.status), after choosing each
// module's serving generation, which may mark records of older rollouts draining. Both
// are persisted with the next write: the next choice reads them.
func ready(st *pb.RegistryState) {
	serving := applyRollouts(st)
	recs := st.GetRecords()
	for _, r := range recs {
		s := StatusDegraded
		switch {
		case r.GetDraining():
			s = StatusDraining
		case !r.GetInitialized():
			s = StatusStarting
		case staged(r, serving):
			s = StatusStaged
		}
		r.GetInstance().Status = s
	}
	// Readiness is transitive: a module is READY once every contract it depends on has a
	// READY instance. The rounds end when one adds nothing.
	done := map[node]bool{}
	for range len(recs) + 1 {
		added := false
		for _, r := range recs {
			if r.GetInstance().GetStatus() != StatusDegraded {
				continue
			}
			if !slices.ContainsFunc(depsOf(r.GetInstance().GetDescriptor_()), func(n node) bool { return !done[n] }) {
				r.GetInstance().Status = StatusReady
				done[nodeOf(r)] = true
				added = true
			}
		}
		if !added {
			break
		}
	}
}

// staged: an initialized record of a rollout other than its module's serving one.
func staged(r *pb.RegistryRecord, serving map[string]string) bool {
	if !usable(r) || r.GetRolloutId() == "" {
		return false
	}
	g, ok := serving[nodeOf(r).module]
	return ok && g != r.GetRolloutId()
}

// rollouts groups the records that name a rollout, keeping their order.
func rollouts(st *pb.RegistryState) (groups map[string][]*pb.RegistryRecord, order []string, start map[string]float64) {
	groups, start = map[string][]*pb.RegistryRecord{}, map[string]float64{}
	for _, r := range st.GetRecords() {
		id := r.GetRolloutId()
		if id == "" {
			continue
		}
		if _, ok := groups[id]; !ok {
			order = append(order, id)
			start[id] = r.GetRegisteredAt()
		}
		groups[id] = append(groups[id], r)
		start[id] = min(start[id], r.GetRegisteredAt())
	}
	return groups, order, start
}

// complete reports whether a rollout can take over: its members agree on their
// cohort, every module of the cohort has a usable instance, and every dependency of
// those is met (inside the cohort by the rollout itself, outside by any usable record).
func complete(st *pb.RegistryState, members []*pb.RegistryRecord) bool {
	declared := sortedUnique(members[0].GetRolloutModules())
	if len(declared) == 0 {
		return false
	}
	live := map[node]bool{}
	liveModules := map[string]bool{}
	for _, m := range members {
		if !slices.Equal(sortedUnique(m.GetRolloutModules()), declared) {
			return false
		}
		if usable(m) {
			live[nodeOf(m)] = true
			liveModules[nodeOf(m).module] = true
		}
	}
	for _, d := range declared {
		if !liveModules[d] {
			return false
		}
	}
	for _, m := range members {
		if !usable(m) {
			continue
		}
		for _, dep := range depsOf(m.GetInstance().GetDescriptor_()) {
			if slices.Contains(declared, dep.module) {
				if !live[dep] {
					return false
				}
				continue
			}
			if !slices.ContainsFunc(st.GetRecords(), func(r *pb.RegistryRecord) bool { return nodeOf(r) == dep && usable(r) }) {
				return false
			}
		}
	}
	return true
}

// applyRollouts chooses each module's serving generation (module id → rollout id, ""
// for the records without one) and marks draining the records a complete rollout
// replaces.
func applyRollouts(st *pb.RegistryState) map[string]string {
	groups, order, start := rollouts(st)
	gen := func(id string) generation {
		if s, ok := start[id]; ok && id != "" {
			return generation{s, id}
		}
		return generation{math.Inf(-1), id}
	}
	isComplete := map[string]bool{}
	serving := map[string]string{}
	for _, id := range order {
		if !complete(st, groups[id]) {
			continue
		}
		isComplete[id] = true
		for _, m := range groups[id] {
			mod := nodeOf(m).module
			if w, ok := serving[mod]; !ok || gen(id).compare(gen(w)) > 0 {
				serving[mod] = id
			}
		}
	}
	for _, r := range st.GetRecords() {
		w, ok := serving[nodeOf(r).module]
		if !ok || r.GetRolloutId() == w {
			continue
		}
		// A newer rollout still coming up is a deploy in progress: left alone.
		if id := r.GetRolloutId(); id != "" && !isComplete[id] && gen(id).compare(gen(w)) > 0 {
			continue
		}
		r.Draining = true
	}
	// A module without a complete rollout keeps the generation that served at the last
	// write, else the oldest.
	type choice struct {
		notServed bool
		g         generation
	}
	best := map[string]choice{}
	served := map[string]map[string]bool{}
	for _, r := range st.GetRecords() {
		mod := nodeOf(r).module
		if _, ok := serving[mod]; ok || !usable(r) {
			continue
		}
		if served[mod] == nil {
			served[mod] = map[string]bool{}
		}
		s := r.GetInstance().GetStatus()
		served[mod][r.GetRolloutId()] = served[mod][r.GetRolloutId()] || r.GetRolloutId() == "" || s == StatusReady || s == StatusDegraded
	}
	for _, r := range st.GetRecords() {
		mod := nodeOf(r).module
		if _, ok := serving[mod]; ok || !usable(r) {
			continue
		}
		c := choice{!served[mod][r.GetRolloutId()], gen(r.GetRolloutId())}
		if b, ok := best[mod]; !ok || less(c.notServed, c.g, b.notServed, b.g) {
			best[mod] = c
		}
	}
	for mod, c := range best {
		serving[mod] = c.g.id
	}
	return serving
}

func less(aNot bool, a generation, bNot bool, b generation) bool {
	if aNot != bNot {
		return !aNot
	}
	return a.compare(b) < 0
}
