// Package chaos proves the engine's promises under faults. A scenario starts real
// engines (child processes of the abi-engine binary, or engines in this process where
// that is enough) against a real broker or a 3-node cluster, drives keyvalue traffic
// through package bench with every call recorded (invoke and complete times, result,
// the instance that answered), injects faults on a schedule drawn from a seed, and
// checks invariants over what was recorded (package check):
//
//   - no failed call across clean handovers;
//   - every call sent after a crash's takeover window answered;
//   - no two engines answering outside the designed handover overlap;
//   - the keyvalue history linearizable across handovers, crashes and pauses;
//   - no write of an engine whose lease was taken over committed after its successor's
//     (what storage committed, read from storage: a zombie's lost update);
//   - no goroutine and no process left behind;
//   - and the timing promises: fencing within lease/2 of a cut, takeover only after a
//     full silent lease, no moment without a serving engine longer than a bound.
//
// The faults: SIGKILL, SIGSTOP and SIGCONT of an engine process, SIGTERM and Shutdown
// handovers, panics injected into each of an engine's actors, a broker restart on the
// same port and store, the loss of each node of a cluster (the lease stream's leader
// first), a TCP proxy between one engine and the broker that cuts or slows it (or cuts
// its lease connection alone), and a foreign value written into the lease key. In a
// build with the tag failpoints the harness also switches fail points on inside the
// engines (Options.Failpoints, package internal/failpoint): a write stalled between its
// lease check and the write (zombie-write), a lease clock that runs fast (clock-skew),
// and one engine bug per checker, each shown failing its checker by a test.
//
// Run runs one scenario and returns its Report (package report): a text table, a JSON
// document and an SVG timeline of throughput, latency and every event of the run. A
// scenario repeats its fault cycle for Options.Duration, and its checks judge one
// cycle at a time (cycles.go, check.Cycle).
// `abi-engine chaos --scenario S --duration D --seed N` calls it; the same command with
// the same seed replays the same fault schedule. docs/chaos.md describes every
// scenario and checker.
//
// The harness is also a library for the CI of a project that embeds the engine:
// Options.Engine builds the project's engine (EngineProcess serves it in child
// processes for the process scenarios, or Options.Binary names a binary of the
// project's own with the same CLI), and Options.Workload drives the project's own
// service and models it for the linearizability checker (docs/chaos.md "In your own
// CI"; examples/counter/chaos_test.go).
//
// Usage:
//
//	rep, err := chaos.Run(ctx, "kill-holder", chaos.Options{
//		Duration: time.Minute, Seed: 7, Binary: "/usr/local/bin/abi-engine", Out: "chaos-out",
//	})
//	if err != nil { ... } // the scenario could not be set up
//	rep.Table(os.Stdout)
//	if !rep.Passed { os.Exit(1) }
package chaos
