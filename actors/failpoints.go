package actors

import (
	"context"
	"fmt"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/lease"
)

// The fail points the ownership tree and the root host (package failpoint): each site
// is a one-line call to a function here. Without the tag failpoints every check below
// is a constant false, and the code it guards is compiled away.

// renewalStore is the store the renewer writes through: with drop-renewal-reply every
// renewal commits, but its reply is dropped, so its outcome is unknown to the machine.
func renewalStore(s lease.Store, fp *failpoint.Set) lease.Store {
	if failpoint.On(fp, failpoint.DropRenewalReply) {
		return dropRenewalReply{Store: s, fp: fp}
	}
	return s
}

type dropRenewalReply struct {
	lease.Store
	fp *failpoint.Set
}

// Update is the renewal: committed, and answered as if its reply never came.
func (d dropRenewalReply) Update(ctx context.Context, h lease.Holder, rev uint64) (uint64, error) {
	n, err := d.Store.Update(ctx, h, rev)
	if err != nil {
		return n, err
	}
	return 0, fmt.Errorf("actors: the reply of the renewal at revision %d, committed as revision %d, was dropped (fail point %s)",
		rev, n, failpoint.DropRenewalReply)
}

// rootFaults are the fail points the handover obeys: release-before-jobs (the release
// first, the jobs a lease later, after the drain), serve-after-release (the members
// told to stop accepting only lease/2 after the successor answered, past the designed
// overlap) and skip-successor (no wait for the successor: the members stop accepting
// right after the release, as before issue 13, and callers meet the gap until the new
// holder subscribes).
func rootFaults(fp *failpoint.Set) handoverFaults {
	return handoverFaults{
		releaseBeforeJobs: failpoint.On(fp, failpoint.ReleaseBeforeJobs),
		serveAfterRelease: failpoint.On(fp, failpoint.ServeAfterRelease),
		skipSuccessor:     failpoint.On(fp, failpoint.SkipSuccessor),
	}
}
