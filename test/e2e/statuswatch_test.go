package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/testproc"
)

// TestStatusWatchUnderLeastPrivilege: status --watch, run under the status set of
// docs/security.md on an account where no engine has run yet, says it waits, then
// follows the first engine's take and epoch, without a permission it lacks.
func TestStatusWatchUnderLeastPrivilege(t *testing.T) {
	blocks := permissionBlocks(t)
	srv := privilegedBroker(t, blocks)
	dir := t.TempDir()
	writeConfig(t, dir, fmt.Sprintf("nats:\n  url: %q\n%s", srv.URL(), asUser(t, dir, "status")))
	watch := startArgs(t, "status --watch", dir, 0, nil, "status", "--watch")
	watch.waitLog("bucket ABI_ENGINE does not exist): waiting for one", 20*time.Second)

	edir := t.TempDir()
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t), WorkingDir: edir, NATSYAML: asUser(t, edir, "engine")})
	a.waitState("serving", 20*time.Second)
	id := a.instanceID()
	watch.waitLog(id+" (rollout v1)", 30*time.Second)
	watch.waitLog("1 serving", 20*time.Second)
	if out := watch.out.String(); strings.Contains(strings.ToLower(out), "permission") {
		t.Errorf("status --watch met a permission it lacks:\n%s", out)
	}
	noViolation(t, a)
}
