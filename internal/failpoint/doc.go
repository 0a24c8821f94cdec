// Package failpoint holds the fail points the chaos harness switches on inside an
// engine, to show on real engines that each of its checkers catches the bug it is
// there for (docs/chaos.md lists every fail point, the checker that catches it and the
// test that shows it).
//
// Fail points exist only in a build with the tag failpoints (go build -tags
// failpoints). Without the tag, Set is an empty struct, Enabled is false and every
// check is a constant the compiler folds away, so a release binary carries no fail
// point and pays nothing for one: TestReleaseBinaryHasNoFailpoints (cmd/abi-engine)
// finds no symbol of this package in the release binary, and BenchmarkOn shows a check
// costs what an empty loop does.
//
// There is no global state: a *Set is passed to each component that hosts a fail point
// (nil switches every one off), and a Set belongs to one engine. The chaos harness
// makes one per engine, from a spec such as
//
//	skip-epoch,stall-before-write=key:zombie:3s,clock-rate=1.5
//
// given to an in-process engine with engine.WithFailpoints(set), and to an engine
// process of a -tags failpoints binary in the environment variable ABI_FAILPOINTS.
//
// The fail points (Name):
//
//	skip-fencing         the lease machine never fences on its own clock (it still
//	                     stops on a write not its own, and the per-call lease check
//	                     still refuses calls after lease/2)
//	release-before-jobs  a handover releases the lease first and stops the jobs a
//	                     lease later
//	serve-after-release  a handover keeps its subscriptions for lease/2 after the new
//	                     holder answers, past the designed overlap of lease/4
//	skip-successor       a handover ends its subscriptions right after the release,
//	                     without waiting for the new holder's: callers meet the gap
//	skip-lease-check     a primary runs every call without checking the lease
//	skip-epoch           storage writes carry no epoch, so a stale one commits
//	resend-unknown       the JetStream keyvalue backend treats every write as of
//	                     unknown outcome and sends it once more
//	stall-before-write   =key:K:D: a call naming key K stalls D after its lease check,
//	                     then runs deaf to its cancellation, as a process paused in
//	                     between would
//	drop-renewal-reply   the reply of every lease renewal is dropped: its outcome is
//	                     unknown to the engine, though the store committed it
//	clock-rate           =R: the lease timing's clock runs R times as fast as the
//	                     real one
//	drop-registry-record every tenth write of the discovery registry leaves out its
//	                     first record, as a store that loses a record would
//	register-twice       a register that creates an instance stores its record twice
package failpoint

// Name names a fail point.
type Name string

// The fail points.
const (
	SkipFencing       Name = "skip-fencing"
	ReleaseBeforeJobs Name = "release-before-jobs"
	ServeAfterRelease Name = "serve-after-release"
	SkipSuccessor     Name = "skip-successor"
	SkipLeaseCheck    Name = "skip-lease-check"
	SkipEpoch         Name = "skip-epoch"
	ResendUnknown     Name = "resend-unknown"
	StallBeforeWrite  Name = "stall-before-write"
	DropRenewalReply  Name = "drop-renewal-reply"
	ClockRate         Name = "clock-rate"
	// The discovery registry's (package discovery).
	DropRegistryRecord Name = "drop-registry-record"
	RegisterTwice      Name = "register-twice"
)

// EnvVar is the environment variable `abi-engine run` reads its fail points from (in
// a -tags failpoints binary; a release binary refuses to start with it set).
const EnvVar = "ABI_FAILPOINTS"
