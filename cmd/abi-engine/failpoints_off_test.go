//go:build !failpoints

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/failpoint"
)

// TestRunRefusesFailpointsWithoutThem: a release binary has no fail points, so it does
// not start with ABI_FAILPOINTS set, rather than run as if it had them.
func TestRunRefusesFailpointsWithoutThem(t *testing.T) {
	r := runCLI(t, map[string]string{failpoint.EnvVar: "skip-epoch"}, "run")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, `ABI_FAILPOINTS="skip-epoch" is set`, "built without fail points", "-tags failpoints")
}

// failpointSymbols are names only fail-point code brings into a binary: the package
// itself, the fail-point types of the actors and the discovery registry's fail points.
var failpointSymbols = []string{"github.com/abi-engine/engine/internal/failpoint.", "actors.dropRenewalReply", "actors.rateClock",
	"discovery.(*Service).dropRecord", "discovery.(*Service).registerTwice"}

// symbols lists the symbols of the binary at path that contain one of subs.
func symbols(t *testing.T, path string, subs []string) []string {
	t.Helper()
	out, err := exec.Command("go", "tool", "nm", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm %s: %v\n%s", path, err, out)
	}
	var found []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				found = append(found, strings.TrimSpace(line))
			}
		}
	}
	return found
}

// TestReleaseBinaryHasNoFailpoints: the release binary carries no fail point. Every
// check is a constant false without the tag, so the compiler drops the code it guards
// and the linker every fail-point symbol: go tool nm finds none. The same look at a
// -tags failpoints binary finds them, so the test can fail.
func TestReleaseBinaryHasNoFailpoints(t *testing.T) {
	if found := symbols(t, buildBinary(t), failpointSymbols); len(found) > 0 {
		t.Fatalf("the release binary carries fail-point symbols:\n%s", strings.Join(found, "\n"))
	}
	tagged := filepath.Join(t.TempDir(), "abi-engine-failpoints")
	if out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", tagged, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags failpoints: %v\n%s", err, out)
	}
	if found := symbols(t, tagged, failpointSymbols); len(found) == 0 {
		t.Fatal("go tool nm finds no fail-point symbol in a -tags failpoints binary either: the look proves nothing")
	}
}

// TestChaosRefusesFailpointScenarios: a release binary cannot stall a call between its
// lease check and its write, nor run a lease clock fast, so `abi-engine chaos` refuses
// zombie-write and clock-skew (exit 2), saying what it needs.
func TestChaosRefusesFailpointScenarios(t *testing.T) {
	for _, sc := range []string{"zombie-write", "clock-skew"} {
		r := runCLI(t, nil, "chaos", "--scenario", sc)
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, "scenario "+sc+" switches fail points on", "-tags failpoints")
	}
	r := runCLI(t, nil, "chaos", "--scenario", "partition", "--failpoints-holder", "skip-fencing")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "this build has no fail points", "skip-fencing")
}
