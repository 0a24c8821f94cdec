package check

import (
	"fmt"
	"math"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/protocol"
	"github.com/anishathalye/porcupine"
)

// register is the state of one keyvalue key: absent, or holding the value whose
// bench.ValueHash is hash.
type register struct {
	found bool
	hash  uint64
}

type kvInput struct {
	kind string // protocol.OpSet, OpSetIfNotExists, OpGet or OpDelete
	hash uint64 // value written by a set or a set_if_not_exists
}

type kvOutput struct {
	found   bool   // get: a value was found
	hash    uint64 // get: its hash
	applied bool   // set_if_not_exists: set; delete: deleted
	// unknown: the call's outcome is not known (Indefinite); it may have taken effect,
	// and it answered nothing, so any outcome is its own.
	unknown bool
}

// registerModel is a keyvalue register per key. Histories are partitioned by key
// before they reach it, so its state is one register.
//
// A call of unknown outcome is porcupine's open call (":info" in Jepsen's terms): it
// returns at infinity, so it may take effect at any moment after its invocation, or
// in effect never (ordered after everything, it is seen by nothing), and whatever it
// found is its answer. So it can neither hide a violation (a read of a value it wrote
// before it was invoked stays one) nor invent one (a read that saw its value, or did
// not, is explained either way).
var registerModel = porcupine.Model{
	Init: func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		st := state.(register)
		in := input.(kvInput)
		out := output.(kvOutput)
		switch in.kind {
		case protocol.OpSet:
			return true, register{found: true, hash: in.hash}
		case protocol.OpSetIfNotExists:
			if !out.unknown && out.applied == st.found {
				return false, st // it set a present key, or did not set an absent one
			}
			if st.found {
				return true, st
			}
			return true, register{found: true, hash: in.hash}
		case protocol.OpDelete:
			if !out.unknown && out.applied != st.found {
				return false, st // it deleted an absent key, or did not delete a present one
			}
			return true, register{}
		default: // get
			if out.found != st.found || (out.found && out.hash != st.hash) {
				return false, st
			}
			return true, st
		}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		out := output.(kvOutput)
		outcome := func(yes, no string) string {
			switch {
			case out.unknown:
				return "?"
			case out.applied:
				return yes
			}
			return no
		}
		switch in.kind {
		case protocol.OpGet:
			if !out.found {
				return "get -> missing"
			}
			return fmt.Sprintf("get -> %016x", out.hash)
		case protocol.OpSet:
			return fmt.Sprintf("set %016x", in.hash)
		case protocol.OpSetIfNotExists:
			return fmt.Sprintf("set_if_not_exists %016x -> %s", in.hash, outcome("set", "not set"))
		case protocol.OpDelete:
			return "delete -> " + outcome("deleted", "not deleted")
		}
		return in.kind
	},
}

// operations turns the keyvalue calls of h into porcupine operations per key, on a
// nanosecond time line starting at the earliest invocation.
//
// A call that failed without running (no responders, a fenced engine's retryable
// UNAVAILABLE) never happened and is left out. A write whose outcome is unknown
// (Indefinite: a timeout, a lost connection) may have taken effect at any moment after
// its invocation, so it is an open call (see registerModel): a return time of infinity
// (math.MaxInt64) and an unknown outcome. A read that failed constrains nothing and is
// left out.
func operations(h []bench.Op) map[string][]porcupine.Operation {
	var base time.Time
	for _, op := range h {
		if base.IsZero() || op.Invoke.Before(base) {
			base = op.Invoke
		}
	}
	byKey := map[string][]porcupine.Operation{}
	for _, op := range h {
		switch op.Kind {
		case protocol.OpSet, protocol.OpSetIfNotExists, protocol.OpGet, protocol.OpDelete:
		default:
			continue
		}
		ret := int64(op.Complete.Sub(base))
		out := kvOutput{found: op.Found, hash: op.Output, applied: op.Applied}
		if op.Failed() {
			if !op.Indefinite || op.Kind == protocol.OpGet {
				continue
			}
			ret, out = math.MaxInt64, kvOutput{unknown: true}
		}
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{
			ClientId: op.Worker,
			Input:    kvInput{kind: op.Kind, hash: op.Input},
			Call:     int64(op.Invoke.Sub(base)),
			Output:   out,
			Return:   ret,
		})
	}
	return byKey
}

// Linearizable checks that the keyvalue history (sets, set_if_not_exists, gets and
// deletes, seeding and cleanup included) is linearizable as one register per key, with porcupine. Every key
// starts absent: a scenario uses keys of its own. timeout bounds the search over all
// keys; a key left undecided when it runs out fails the check, named as such.
func Linearizable(h []bench.Op, timeout time.Duration) Result {
	return judgeKeys(registerModel, operations(h), timeout, "keyvalue operations",
		"no order of the writes explains what a read or a conditional write saw")
}
