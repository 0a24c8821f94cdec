package main

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
)

// TestProcessCallRefusesAnUnknownOperation: against a real engine process, call of an
// operation the service does not have, or of a service nobody serves, is refused at
// once (exit 2) naming the valid ones, where it used to wait its retries out and report
// UNAVAILABLE as if the engine were down. A known operation still goes through.
func TestProcessCallRefusesAnUnknownOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	eng := startEngine(t, sharedEngineConfig(srv.URL()))
	eng.waitReady(t)

	// A minute of timeout: only the check before the call can end it with exit 2.
	code, out, errOut := runBinary(t, nil, "call", "keyvalue", "frobnicate", "--nats", srv.URL(), "--timeout", "60s")
	if code != exitUsage {
		t.Fatalf("call keyvalue frobnicate: exit %d, want 2\n%s%s", code, out, errOut)
	}
	wantContains(t, "call keyvalue frobnicate", errOut, `OPERATION "frobnicate": keyvalue has no such operation`,
		"delete_if_value_matches", "get_ttl", "list_keys")

	code, out, errOut = runBinary(t, nil, "call", "kv", "get", `{"key":"k"}`, "--nats", srv.URL(), "--timeout", "60s")
	if code != exitUsage {
		t.Fatalf("call kv get: exit %d, want 2\n%s%s", code, out, errOut)
	}
	wantContains(t, "call kv get", errOut, `SERVICE "kv": no engine serves it`, "keyvalue, object_storage")

	code, out, errOut = runBinary(t, nil, "call", "keyvalue", "exists", `{"key":"k"}`, "--nats", srv.URL())
	if code != exitOK {
		t.Fatalf("call keyvalue exists: exit %d, want 0\n%s%s", code, out, errOut)
	}
	wantContains(t, "call keyvalue exists", out, `{"exists":false}`)

	eng.signal(t, syscall.SIGTERM)
	if code := eng.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the engine exited %d after SIGTERM, want 0:\n%s", code, eng.stderr)
	}
}

// TestCallChecksKernelOperationsWithoutAnEngine: with no engine to ask, a kernel
// service's operations are known all the same.
func TestCallChecksKernelOperationsWithoutAnEngine(t *testing.T) {
	srv := natstest.Start(t)
	r := runCLI(t, nil, "call", "keyvalue", "frobnicate", "--nats", srv.URL(), "--timeout", "60s")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, `OPERATION "frobnicate": keyvalue has no such operation; its operations are: get, set,`)
}

// TestCallHelpListsTheOperations: call --help lists the kernel services' operations.
func TestCallHelpListsTheOperations(t *testing.T) {
	r := runCLI(t, nil, "call", "--help")
	wantCode(t, r, exitOK)
	for svc, ops := range kernelOperations {
		for _, op := range ops {
			wantContains(t, "call --help", r.stdout, svc+":", op)
		}
	}
}

// TestKernelOperationsAreTheServices: call's list of the kernel operations is the
// services' own.
func TestKernelOperationsAreTheServices(t *testing.T) {
	for _, svc := range []primaries.Service{keyvalue.Service(nil), objectstorage.Service(nil)} {
		var got []string
		for op := range svc.Operations {
			got = append(got, op)
		}
		want := slices.Clone(kernelOperations[svc.Name])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: call knows %v, the service has %v", svc.Name, want, got)
		}
	}
}
