package check

import "testing"

func TestNoStaleWrite(t *testing.T) {
	takeover := []LeaseEvent{{At: at(0), Revision: 1, Holder: instA}, {At: at(5), Revision: 2, Holder: instA}, {At: at(10), Revision: 3, Holder: instB}}
	writers := map[uint64]string{1: instA, 2: instB, 3: instA}
	commit := func(rev, hash uint64, ms int) Commit { return Commit{At: at(ms), Revision: rev, Key: "z", Hash: hash} }
	// The zombie's write refused by storage: only the successor's commits.
	wantPass(t, NoStaleWrite([]Commit{commit(1, 1, 1), commit(2, 2, 12)}, writers, takeover))
	// The zombie's write committed after the successor's: the successor's update is lost.
	lost := []Commit{commit(1, 1, 1), commit(2, 2, 12), commit(3, 3, 15)}
	wantFail(t, NoStaleWrite(lost, writers, takeover), 1, "the update of bbbbbbbb is lost")
	// Commit order is storage's (the revision), not the order the harness was told.
	wantFail(t, NoStaleWrite([]Commit{lost[2], lost[0], lost[1]}, writers, takeover), 1, "revision 3")
	// A clean release is not a takeover: the old engine's drained calls commit by design.
	released := []LeaseEvent{{At: at(0), Revision: 1, Holder: instA}, {At: at(9), Revision: 2}, {At: at(10), Revision: 3, Holder: instB}}
	wantPass(t, NoStaleWrite(lost, writers, released))
	// Values nobody is known to have written, and deletes, are not judged.
	wantPass(t, NoStaleWrite([]Commit{commit(1, 2, 12), commit(2, 99, 15), {Revision: 3, Key: "z", Deleted: true}}, writers, takeover))
	// A zombie is stale to every later holder: A taken over by B, B by C.
	chain := append(takeover[:3:3], LeaseEvent{At: at(20), Revision: 4, Holder: instC})
	w3 := map[uint64]string{1: instA, 4: instC}
	wantFail(t, NoStaleWrite([]Commit{commit(1, 4, 21), commit(2, 1, 22)}, w3, chain), 1, "written by aaaaaaaa")
	// The lease taken back by A itself: its writes after are its own tenure's.
	back := append(takeover[:3:3], LeaseEvent{At: at(20), Revision: 4, Holder: instA})
	wantFail(t, NoStaleWrite(lost, writers, back), 1, "revision 3")
	// ... but B's write after A's, made before A took the lease back from B, is not stale.
	wantPass(t, NoStaleWrite([]Commit{commit(1, 1, 1), commit(2, 2, 12)}, writers, back))
	// A released by B, then held by A again: B's late write is its drain's, not stale.
	wantPass(t, NoStaleWrite([]Commit{commit(1, 2, 12), commit(2, 3, 25), commit(3, 2, 26)}, writers,
		[]LeaseEvent{back[0], back[2], {At: at(14), Revision: 5}, {At: at(20), Revision: 6, Holder: instA}}))
}
