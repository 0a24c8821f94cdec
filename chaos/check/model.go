package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/anishathalye/porcupine"
)

// Model is the linearizability checker's model of a workload of another service than
// keyvalue (package chaos, Workload): porcupine's model of one partition of the
// history (the calls on one Key), and how a recorded call becomes its input and output.
type Model struct {
	// Model is porcupine's model; its Step sees what Input and Output make of a call,
	// and Unknown as the output of a call whose outcome is unknown.
	Model porcupine.Model
	// Input is what a call asked for (its Kind and what the workload recorded of its
	// request).
	Input func(op bench.Op) any
	// Output is what a call that succeeded returned.
	Output func(op bench.Op) any
	// Unknown is the output of a call that failed in a way that leaves its outcome
	// open (bench.Op.Indefinite): it may have taken effect at any moment after it was
	// invoked, or never, and its Step must accept any state for it (porcupine's open
	// call: it returns at infinity).
	Unknown any
	// Reads are the kinds of call that change nothing: a failed one constrains nothing
	// and is left out.
	Reads []string
}

// modelOperations turns h into porcupine operations per key for m, as operations does
// for keyvalue: a call that failed without running never happened; one of unknown
// outcome is open, unless it is a read.
func modelOperations(h []bench.Op, m Model) map[string][]porcupine.Operation {
	var base time.Time
	for _, op := range h {
		if base.IsZero() || op.Invoke.Before(base) {
			base = op.Invoke
		}
	}
	byKey := map[string][]porcupine.Operation{}
	for _, op := range h {
		ret := int64(op.Complete.Sub(base))
		var out any
		switch {
		case !op.Failed():
			out = m.Output(op)
		case !op.Indefinite || slices.Contains(m.Reads, op.Kind):
			continue
		default:
			ret, out = math.MaxInt64, m.Unknown
		}
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{
			ClientId: op.Worker,
			Input:    m.Input(op),
			Call:     int64(op.Invoke.Sub(base)),
			Output:   out,
			Return:   ret,
		})
	}
	return byKey
}

// LinearizableModel checks that h is linearizable under m, one partition per key, with
// porcupine, within timeout over all keys; a key left undecided fails the check,
// named as such. It is Linearizable for a workload of the embedder's own.
func LinearizableModel(h []bench.Op, m Model, timeout time.Duration) Result {
	return judgeKeys(m.Model, modelOperations(h, m), timeout, "operations", "no order of the calls explains what they returned")
}

// judgeKeys checks each key's operations under model with porcupine, within timeout
// over all keys, and names every key that has no linearization or was left undecided.
// what names the operations in the summary, illegal what a violation means.
func judgeKeys(model porcupine.Model, byKey map[string][]porcupine.Operation, timeout time.Duration, what, illegal string) Result {
	keys := make([]string, 0, len(byKey))
	ops := 0
	for k, o := range byKey {
		keys = append(keys, k)
		ops += len(o)
	}
	sort.Strings(keys)
	var v violations
	undecided := 0
	per := timeout
	if len(keys) > 0 {
		per = max(timeout/time.Duration(len(keys)), 100*time.Millisecond)
	}
	for _, k := range keys {
		switch porcupine.CheckOperationsTimeout(model, byKey[k], per) {
		case porcupine.Illegal:
			v.add("key %q: its %d operations have no linearization (%s)", k, len(byKey[k]), illegal)
		case porcupine.Unknown:
			undecided++
			v.add("key %q: %d operations not decided within %s", k, len(byKey[k]), per)
		}
	}
	summary := fmt.Sprintf("%d %s over %d keys, linearizable", ops, what, len(keys))
	if v.count > 0 {
		summary = fmt.Sprintf("%d of %d keys not linearizable (%d undecided) over %d operations", v.count-undecided, len(keys), undecided, ops)
	}
	return v.result("linearizable", summary)
}
