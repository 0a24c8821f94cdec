package check

import (
	"fmt"
	"sort"
	"time"
)

// ModuleCall is one call of the discovery scenario's module traffic: a register, renew
// or unregister of an instance, or a read (get_module of a module, list_modules of them all)
// and the instance ids it returned, duplicates kept.
type ModuleCall struct {
	Op string
	// Instance is the instance a register or renew was for.
	Instance string
	// Module is the module a get_module asked for; "" for list_modules (every module).
	Module           string
	Invoke, Complete time.Time
	// Err is the call's error; "" for a success.
	Err string
	// Seen are the instance ids a read returned, in its order.
	Seen []string
}

// read reports whether c is a lookup.
func (c ModuleCall) read() bool { return c.Op == "get_module" || c.Op == "list_modules" }

// write reports whether c is a register, renew or unregister.
func (c ModuleCall) write() bool {
	return c.Op == "register" || c.Op == "renew" || c.Op == "unregister"
}

// RegistryKept checks the module registry over a history of module calls: instances
// maps every instance the traffic registered to its module, lease is the registry's
// membership lease. A successful read must
//   - return every instance of what it read whose last successful register or renew
//     completed before the read was sent and was sent less than a lease before the read
//     completed (its record was committed before the read and expires no sooner than
//     that renewal's send plus the lease), less tolerance: else the instance vanished
//     (an instance whose last such call was a successful unregister may be missing);
//   - return no instance id twice (one register applied twice) and none the traffic
//     never registered.
func RegistryKept(calls []ModuleCall, instances map[string]string, lease, tolerance time.Duration) Result {
	// The successful registers, renews and unregisters of each instance, by completion.
	writes := map[string][]ModuleCall{}
	for _, c := range calls {
		if c.write() && c.Err == "" {
			writes[c.Instance] = append(writes[c.Instance], c)
		}
	}
	for _, ws := range writes {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Complete.Before(ws[j].Complete) })
	}
	ids := make([]string, 0, len(instances))
	for id := range instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var v violations
	reads := 0
	for _, r := range calls {
		if !r.read() || r.Err != "" {
			continue
		}
		reads++
		what := r.Op
		if r.Module != "" {
			what = fmt.Sprintf("get_module(%s)", r.Module)
		}
		seen := map[string]int{}
		for _, id := range r.Seen {
			seen[id]++
		}
		for _, id := range sortedKeys(seen) {
			switch {
			case seen[id] > 1:
				v.add("%s invoked %s completed %s returned instance %s %d times: one register applied more than once",
					what, stamp(r.Invoke), stamp(r.Complete), id, seen[id])
			case instances[id] == "":
				v.add("%s invoked %s completed %s returned instance %s, which nobody registered", what, stamp(r.Invoke), stamp(r.Complete), id)
			}
		}
		for _, id := range ids {
			if (r.Module != "" && instances[id] != r.Module) || seen[id] > 0 {
				continue
			}
			ws := writes[id]
			// The last write completed before the read was sent.
			i := sort.Search(len(ws), func(i int) bool { return !ws[i].Complete.Before(r.Invoke) }) - 1
			if i < 0 {
				continue
			}
			w := ws[i]
			if w.Op == "unregister" {
				continue
			}
			if r.Complete.Add(tolerance).Before(w.Invoke.Add(lease)) {
				v.add("%s invoked %s completed %s missed instance %s, whose %s sent %s completed %s keeps it until at least %s: a renewed instance vanished",
					what, stamp(r.Invoke), stamp(r.Complete), id, w.Op, stamp(w.Invoke), stamp(w.Complete), stamp(w.Invoke.Add(lease)))
			}
		}
	}
	summary := fmt.Sprintf("%d reads of %d instances: every renewed instance present, each once", reads, len(instances))
	if v.count > 0 {
		summary = fmt.Sprintf("%d violation(s) in %d reads of %d instances", v.count, reads, len(instances))
	}
	return v.result("registry-kept", summary)
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
