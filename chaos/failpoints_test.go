//go:build failpoints

package chaos

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/client"
)

// Each fail point makes an engine misbehave the way one checker is there to catch, on
// real engines against a real broker: its test runs a scenario with it on and shows
// that checker failing. With it off the same scenario passes (TestCISelection).
// docs/chaos.md lists them.

// failed runs name with opts and checks that the run did not break down and that
// the check want failed; it returns the report.
func failed(t *testing.T, name string, opts Options, want string) *Report {
	t.Helper()
	opts.Seed = ciSeed
	rep := runScenario(t, name, opts)
	t.Log("\n" + table(t, rep))
	if rep.Error != "" {
		t.Fatalf("scenario %s broke down: %s", name, rep.Error)
	}
	c := checkNamed(rep, want)
	switch {
	case c.Name == "":
		t.Fatalf("scenario %s ran no %s check", name, want)
	case c.Passed:
		t.Fatalf("%s passed with fail points %+v: %s", want, opts.Failpoints, c.Summary)
	}
	t.Logf("%s failed, as it must: %s", want, c.Summary)
	return rep
}

func TestSkipFencingFailsFencedWithin(t *testing.T) {
	failed(t, "partition", Options{Failpoints: Failpoints{Holder: "skip-fencing"}}, "fenced-within")
}

func TestReleaseBeforeJobsFailsJobsNoOverlap(t *testing.T) {
	failed(t, "handover", Options{Failpoints: Failpoints{Holder: "release-before-jobs"}}, "jobs-no-overlap")
}

func TestServeAfterReleaseFailsNoOverlap(t *testing.T) {
	failed(t, "rolling-deploy", Options{Failpoints: Failpoints{Holder: "serve-after-release"}}, "no-overlap")
}

// TestSkipLeaseCheckFailsNoOverlap shows the per-call lease check where it is the one
// line of defence: a holder that does not fence (skip-fencing) and whose lease
// connection alone is cut (clock-skew) still answers nothing once lease/2 has passed,
// because every call checks the lease; without the check (skip-lease-check) it answers
// next to its successor. (In pause-holder a resumed holder's fence reaches its
// primaries before any call it found queued completes, so there the check is a second
// line and skip-lease-check alone shows nothing; docs/chaos.md.)
func TestSkipLeaseCheckFailsNoOverlap(t *testing.T) {
	rep := failed(t, "clock-skew", Options{Failpoints: Failpoints{Holder: "skip-fencing"}}, "fenced-within")
	if c := checkNamed(rep, "no-overlap"); !c.Passed {
		t.Fatalf("with the lease check on, an unfenced holder answered next to its successor: %s", c.Summary)
	}
	failed(t, "clock-skew", Options{Failpoints: Failpoints{Holder: "skip-fencing,skip-lease-check"}}, "no-overlap")
}

// checkNamed is the check of rep called name (zero if it ran none).
func checkNamed(rep *Report, name string) check.Result {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return check.Result{}
}

func TestResendUnknownFailsLinearizable(t *testing.T) {
	failed(t, "handover", Options{Failpoints: Failpoints{Holder: "resend-unknown"}}, "linearizable")
}

func TestDropRenewalReplyFailsServingGap(t *testing.T) {
	failed(t, "handover", Options{Failpoints: Failpoints{Holder: "drop-renewal-reply"}}, "serving-gap")
}

// TestDropRenewalReplyFailsServingGapOnACluster: on a cluster serving-gap leaves out
// the stretches a stream had no leader, and nothing else. A holder that fences
// on its own while its renewals keep the lease from the standby leaves no engine
// serving while the streams take writes, and the check names that stretch. The
// schedule breaks down too (no engine serves once the first node is back); the check
// judges what was recorded until then.
func TestDropRenewalReplyFailsServingGapOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster: not in -short")
	}
	rep := runScenario(t, "cluster-node-loss", Options{Seed: ciSeed, Failpoints: Failpoints{Holder: "drop-renewal-reply"}})
	t.Log("\n" + table(t, rep))
	c := checkNamed(rep, "serving-gap")
	switch {
	case c.Name == "":
		t.Fatal("cluster-node-loss ran no serving-gap check")
	case c.Passed:
		t.Fatalf("serving-gap passed with drop-renewal-reply on the holder: %s", c.Summary)
	case !strings.Contains(strings.Join(c.Details, "\n"), "while the stores could take writes"):
		t.Fatalf("serving-gap failed, but not on a stretch the stores could take writes in: %v", c.Details)
	}
	t.Logf("serving-gap failed, as it must: %s; %s", c.Summary, c.Details[0])
}

// TestClockRateBeyondTheBoundFailsNoOverlap: a standby whose lease clock runs 3 times
// as fast takes over lease/3 after the holder's last renewal, before the holder fences
// at lease/2: both answer for up to lease/6, less the successor's start. At lease 4 s
// that window is 667 ms, while the holder's renewals (every lease/4) still come 333 ms
// before the standby would judge it silent. A window of 200 ms (rate 2.5, lease 2 s)
// proved no overlap in a clean CI run, and one of 300 ms none on a loaded machine.
func TestClockRateBeyondTheBoundFailsNoOverlap(t *testing.T) {
	failed(t, "clock-skew", Options{ClockRate: 3, Lease: 4 * time.Second}, "no-overlap")
}

// TestFastContenderFailsTakeoverAfterSilence: a standby whose lease clock runs 1.5
// times as fast judges a lease of silence in two thirds of one; partition judges every
// takeover by the real lease, and takeover-after-silence catches it.
func TestFastContenderFailsTakeoverAfterSilence(t *testing.T) {
	failed(t, "partition", Options{Failpoints: Failpoints{Others: "clock-rate=1.5"}}, "takeover-after-silence")
}

// postgresURL is the database of the PostgreSQL variants; they skip without it.
func postgresURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("ABI_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("ABI_TEST_POSTGRES_URL is not set: no PostgreSQL to run on")
	}
	return url
}

func TestZombieWriteOnPostgres(t *testing.T) {
	requirePassed(t, runScenario(t, "zombie-write", Options{Seed: ciSeed, KeyValue: KeyValuePostgres, PostgresURL: postgresURL(t)}))
}

func TestSkipEpochFailsNoStaleWrite(t *testing.T) {
	failed(t, "zombie-write", Options{Failpoints: Failpoints{Holder: "skip-epoch"}}, "no-stale-write")
}

// On a 3-node cluster the buckets are R3, where the server judges expectations one
// subject at a time and the writes claim their check shards: the stale write is still
// refused by the epoch, and is stored without it.
func TestZombieWriteOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster: not in -short")
	}
	requirePassed(t, runScenario(t, "zombie-write", Options{Seed: ciSeed, Cluster: true}))
}

func TestSkipEpochFailsNoStaleWriteOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster: not in -short")
	}
	failed(t, "zombie-write", Options{Failpoints: Failpoints{Holder: "skip-epoch"}, Cluster: true}, "no-stale-write")
}

func TestSkipEpochFailsNoStaleWriteOnPostgres(t *testing.T) {
	failed(t, "zombie-write", Options{Failpoints: Failpoints{Holder: "skip-epoch"}, KeyValue: KeyValuePostgres, PostgresURL: postgresURL(t)}, "no-stale-write")
}

// TestSkipSuccessorFailsZeroFailures shows that the zero-failures checker can fail, and
// what the handover's successor phase is for: with skip-successor the old engine ends
// its subscriptions right after the release, and with the client's no-responders retry
// off, the calls that fall into the gap before the new holder has subscribed fail; the
// checker names them, while the other invariants still hold.
func TestSkipSuccessorFailsZeroFailures(t *testing.T) {
	// The gap lasts a few milliseconds (the successor's take, epoch read and subscribe),
	// so a handover may pass without a call in it: a dozen of them make one sure.
	rep := runScenario(t, "rolling-deploy", Options{Seed: ciSeed, Duration: 15 * time.Second,
		Retry: &client.RetryPolicy{Window: 0}, Failpoints: Failpoints{Holder: "skip-successor", Others: "skip-successor"}})
	if rep.Error != "" {
		t.Fatalf("scenario broke down: %s\n%s", rep.Error, table(t, rep))
	}
	byName := map[string]check.Result{}
	for _, c := range rep.Checks {
		byName[c.Name] = c
	}
	zf, ok := byName["zero-failures"]
	if !ok || zf.Passed || zf.Count == 0 {
		t.Fatalf("zero-failures did not fail with skip-successor and the retry off:\n%s", table(t, rep))
	}
	if !strings.Contains(strings.Join(zf.Details, "\n"), "no responders") {
		t.Fatalf("zero-failures failed, but not on calls that reached nobody:\n%s", table(t, rep))
	}
	for _, name := range []string{"no-overlap", "linearizable", "exit-codes", "no-leaks"} {
		if c, ok := byName[name]; !ok || !c.Passed {
			t.Errorf("%s should still pass with skip-successor and the retry off: %+v", name, c)
		}
	}
	t.Logf("with skip-successor and the retry off: %s", zf.Summary)
}

// The registry's fail points, on every engine of the discovery scenario: a record lost
// on write shows as a renewed instance missing from a read, a register stored twice as
// one instance id returned twice.
func TestDropRegistryRecordFailsRegistryKept(t *testing.T) {
	fp := Failpoints{Holder: "drop-registry-record", Others: "drop-registry-record"}
	rep := failed(t, "discovery", Options{Failpoints: fp}, "registry-kept")
	if c := checkNamed(rep, "registry-kept"); !strings.Contains(strings.Join(c.Details, "\n"), "a renewed instance vanished") {
		t.Fatalf("registry-kept failed otherwise than by a vanished instance: %v", c.Details)
	}
}

func TestRegisterTwiceFailsRegistryKept(t *testing.T) {
	fp := Failpoints{Holder: "register-twice", Others: "register-twice"}
	rep := failed(t, "discovery", Options{Failpoints: fp}, "registry-kept")
	if c := checkNamed(rep, "registry-kept"); !strings.Contains(strings.Join(c.Details, "\n"), "one register applied more than once") {
		t.Fatalf("registry-kept failed otherwise than by a register applied twice: %v", c.Details)
	}
}
