package main

import (
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
)

// TestProcessEvictForceTakesTheInstance: evict --force --instance ID deletes nothing
// when the lease names another engine (the holder changed since ID was read), and
// evicts when it names ID.
func TestProcessEvictForceTakesTheInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	eng := startEngine(t, sharedEngineConfig(srv.URL()))
	eng.waitReady(t)
	holder := eng.status(t).InstanceID
	gone := strings.Repeat("0", 32)

	code, out, errOut := runBinary(t, nil, "evict", "--force", "--instance", gone, "--nats", srv.URL())
	if code != exitRuntime {
		t.Fatalf("evict --force --instance %s: exit %d, want 1\n%s%s", gone, code, out, errOut)
	}
	wantContains(t, "evict's error", errOut, "held by "+holder, "not by "+gone, "nothing was deleted")
	if st := eng.status(t); st.State != "serving" {
		t.Fatalf("the holder is %s after an evict of another instance, want serving", st.State)
	}

	code, out, errOut = runBinary(t, nil, "evict", "--instance", holder, "--nats", srv.URL())
	if code != exitUsage {
		t.Fatalf("evict --instance without --force: exit %d, want 2\n%s%s", code, out, errOut)
	}

	code, out, errOut = runBinary(t, nil, "evict", "--force", "--instance", holder, "--nats", srv.URL())
	if code != exitOK {
		t.Fatalf("evict --force --instance %s: exit %d, want 0\n%s%s", holder, code, out, errOut)
	}
	wantContains(t, "evict's output", out, "evicted "+holder)
}
