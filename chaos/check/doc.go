// Package check holds the invariant checkers of the chaos harness. Each is a pure
// function over what a scenario recorded: the client history (bench.Op: invoke and
// complete times, result, the instance that answered) and the lease or engine events
// the harness observed. None of them talks to a broker or reads a clock, so each is
// unit-tested on synthetic histories that pass and histories that fail; the chaos tests
// show each failing on real engines too (fail points, package internal/failpoint).
//
// The checkers (docs/chaos.md explains each rule, why it is the right one, and which
// test shows it failing on engines with a real bug):
//
//   - ZeroFailures: every call succeeded (clean handovers).
//   - AnsweredAfterTakeover: every call invoked at least a takeover window after a
//     fault succeeded.
//   - AnsweredOnlyBy: every call invoked after a moment was answered, and only by the
//     given instance (a paused holder that resumed answers nothing).
//   - NoOverlap: no two instances were provably accepting calls at the same time for
//     longer than the designed handover overlap, judged from the recorded calls alone.
//   - Linearizable: the keyvalue history is linearizable per key (porcupine), calls of
//     unknown outcome taken as open calls.
//   - NoStaleWrite: no engine whose lease was taken over wrote after its successor had,
//     judged from what storage committed (Commit), not from the calls.
//   - NoLeaks: no goroutine and no child process outlived the scenario.
//   - FencedWithin, TakeoverAfterSilence, ServingGap: the timing promises of fencing,
//     takeover and cluster fail-over, judged from observed events.
//
// A Result names the checker, says whether it passed, and lists a bounded number of
// violations, each naming the operation or event that proves it.
//
// A repeating scenario is judged one cycle at a time: Cycle bounds what a check of
// that cycle sees (the calls invoked in it, the lease revisions before its end) and
// where its windows close, Cycle.Label names the cycle in the verdict and every
// violation, and Merge folds the cycles' verdicts of a check into one line.
package check
