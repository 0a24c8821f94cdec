package check

import (
	"fmt"
	"slices"
	"time"
)

// Commit is one write storage committed to a key, as the harness recorded it from
// storage itself (a watch of the key's revisions, or the database's log of the key).
type Commit struct {
	At time.Time `json:"at"`
	// Revision orders the commits of one key as storage committed them.
	Revision uint64 `json:"revision"`
	Key      string `json:"key"`
	// Hash is bench.ValueHash of the value written; 0 for a delete.
	Hash    uint64 `json:"hash,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// NoStaleWrite checks that no engine whose lease was taken over wrote to storage after
// its successor had: among the commits of a key, a write by X committed after a write
// by Y, where Y held the lease after X and X's lease was taken over (it did not release
// it: it was paused, cut off or evicted), is a lost update. Y's write was acknowledged,
// then a zombie overwrote it.
//
// The linearizability check cannot see this: the zombie's write took effect within its
// own call's interval (invoked before the takeover, answered after it), so a register
// history that puts it last is linearizable. Only what storage committed, and who wrote
// it, shows it. writers says who wrote what: the instance that wrote the value with
// each hash; commits of other values are not judged. A clean release is not a
// takeover: the calls an old engine answers during its drain commit by design.
func NoStaleWrite(commits []Commit, writers map[uint64]string, leases []LeaseEvent) Result {
	over := takeovers(leases)
	byKey := map[string][]Commit{}
	var keys []string
	for _, c := range commits {
		if _, ok := byKey[c.Key]; !ok {
			keys = append(keys, c.Key)
		}
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	slices.Sort(keys)
	var v violations
	judged := 0
	for _, k := range keys {
		cs := byKey[k]
		slices.SortStableFunc(cs, func(a, b Commit) int { return compareRevisions(a.Revision, b.Revision) })
		var earlier []Commit // attributed commits so far
		for _, c := range cs {
			x, ok := writers[c.Hash]
			if c.Deleted || !ok {
				continue
			}
			judged++
			for _, e := range earlier {
				y := writers[e.Hash]
				// Stale: y had taken x's lease over when it wrote (the harness saw y's
				// write after it saw y take over), and x did not hold it again before
				// its own write.
				t, taken := over[[2]string{x, y}]
				if taken && !e.At.Before(t.at) && (t.until.IsZero() || c.At.Before(t.until)) {
					v.add("key %q: revision %d (%016x) written by %s, whose lease %s took over at %s, committed after revision %d (%016x) written by %s: the update of %s is lost",
						k, c.Revision, c.Hash, short(x), short(y), stamp(t.at), e.Revision, e.Hash, short(y), short(y))
					break
				}
			}
			earlier = append(earlier, c)
		}
	}
	summary := fmt.Sprintf("%d commits of %d key(s), %d of them by a known writer: none by an engine after the one that took its lease over", len(commits), len(keys), judged)
	if v.count > 0 {
		summary = fmt.Sprintf("%d write(s) committed by an engine after the one that took its lease over had written", v.count)
	}
	return v.result("no-stale-write", summary)
}

func compareRevisions(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// takeover is when a holder took the lease over from an earlier one (at), and when
// that earlier one held it again (until; zero: never).
type takeover struct{ at, until time.Time }

// takeovers maps {X, Y} to the first takeover of X's lease by Y: Y held the lease after
// X lost it without releasing it (the lease went from X to another value with no free
// one between), or after a holder that came after X so: a zombie is stale to every
// engine after it, until it holds the lease again itself.
func takeovers(events []LeaseEvent) map[[2]string]takeover {
	type tenure struct {
		holder   string
		from     time.Time
		released bool // it ended with the lease freed
	}
	var ts []tenure
	for _, e := range events {
		switch {
		case e.Holder == "":
			if n := len(ts); n > 0 {
				ts[n-1].released = true
			}
		case len(ts) > 0 && ts[len(ts)-1].holder == e.Holder && !ts[len(ts)-1].released:
		default:
			ts = append(ts, tenure{holder: e.Holder, from: e.At})
		}
	}
	out := map[[2]string]takeover{}
	for i, x := range ts {
		if x.released || x.holder == ForeignHolder {
			continue
		}
		var pairs [][2]string
		until := time.Time{}
		for _, y := range ts[i+1:] {
			if y.holder == x.holder {
				until = y.from // x holds it again: its later writes are that tenure's
				break
			}
			key := [2]string{x.holder, y.holder}
			if _, ok := out[key]; !ok && y.holder != ForeignHolder {
				out[key] = takeover{at: y.from}
				pairs = append(pairs, key)
			}
		}
		for _, key := range pairs {
			t := out[key]
			t.until = until
			out[key] = t
		}
	}
	return out
}
