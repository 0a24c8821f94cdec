package discovery

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

type graph map[node][]node

// refuseCycles refuses a registration whose module would reach itself through the
// contracts it requires, in any view of the registry that could serve at once: the
// generations serving now, and each other live generation beside them. Only cycles
// through the registering module count, and a rollout may reverse an edge between
// modules it replaces.
func refuseCycles(st *pb.RegistryState, req *pb.RegisterRequest, members []string) error {
	cp := proto.Clone(st).(*pb.RegistryState)
	serving := applyRollouts(cp)
	edges := map[string]graph{}
	var gens []string
	cohorts := map[string][]string{}
	for _, r := range cp.GetRecords() {
		if r.GetDraining() {
			continue
		}
		g := r.GetRolloutId()
		if edges[g] == nil {
			edges[g] = graph{}
			gens = append(gens, g)
		}
		edges[g][nodeOf(r)] = depsOf(r.GetInstance().GetDescriptor_())
		cohorts[g] = r.GetRolloutModules()
	}
	root := node{req.GetDescriptor_().GetModuleId(), req.GetDescriptor_().GetContractMajor()}
	own := edges[req.GetRolloutId()]
	if own == nil {
		own = graph{}
	}
	delete(edges, req.GetRolloutId())
	own[root] = depsOf(req.GetDescriptor_())
	replaced := func(n node) bool { return slices.Contains(members, n.module) }

	current := graph{}
	for _, g := range gens {
		for n, deps := range edges[g] {
			if s, ok := serving[n.module]; ok && s == g && !replaced(n) {
				current[n] = deps
			}
		}
	}
	views := []graph{current}
	for _, g := range gens {
		if _, ok := edges[g]; !ok {
			continue
		}
		view := graph{}
		for n, deps := range current {
			if !slices.Contains(cohorts[g], n.module) {
				view[n] = deps
			}
		}
		for n, deps := range edges[g] {
			if !replaced(n) {
				view[n] = deps
			}
		}
		views = append(views, view)
	}
	for _, view := range views {
		all := maps.Clone(view)
		maps.Copy(all, own)
		if reaches(all, root) {
			return refuse(ErrDependencyCycle, textCycle)
		}
	}
	return nil
}

// reaches reports whether a walk from root's dependencies comes back to root.
func reaches(g graph, root node) bool {
	seen := map[node]bool{}
	stack := slices.Clone(g[root])
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == root {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, g[n]...)
	}
	return false
}
