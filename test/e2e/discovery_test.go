package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// discoveryYAML turns discovery on (project e2e, lease seconds) with the token secret.
func discoveryYAML(t *testing.T, secret []byte, lease float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("  jwt_secret_file: %q\n  discovery: {project: e2e, lease_seconds: %g}\n", path, lease)
}

// TestDiscoveryAfterTheHolderIsKilled: ten Go module instances are READY on engine
// process A; A is SIGKILLed and its standby B takes over; every instance is READY
// again on B under its own instance id within 2 discovery lease periods of B serving
// (those that expired meanwhile register again, as the SDK does).
func TestDiscoveryAfterTheHolderIsKilled(t *testing.T) {
	const lease = 3.0
	secret := []byte("e2e-discovery-secret")
	srv := natstest.Start(t)
	nats := discoveryYAML(t, secret, lease)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t), NATSYAML: nats})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t), NATSYAML: nats})
	b.waitHTTP("/readyz", 200, 20*time.Second)
	b.waitState("standby", 5*time.Second)

	tok, err := servicetoken.Mint(secret, "e2e-module", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := discoveryclient.New(natstest.Connect(t, srv.URL()), "e2e", discoveryclient.StaticToken(tok), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[string]bool{}
	for i := range 10 {
		s, err := discoveryclient.NewSession(cl, &pb.ModuleDescriptor{ModuleId: "e2e.module", ContractMajor: 1}, "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if err := s.SetInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		ids[s.InstanceID()] = true
		t.Cleanup(func() { _ = s.Close(context.Background()) })
	}
	allReady := func() bool {
		ins, err := cl.GetModule(ctx, "e2e.module", 1)
		if err != nil || len(ins) != len(ids) {
			return false
		}
		for _, in := range ins {
			if !ids[in.InstanceId] || in.Status != "READY" {
				return false
			}
		}
		return true
	}
	testwait.For(t, 10*time.Second, "ten instances READY on A", allReady)
	a.signal(syscall.SIGKILL)
	a.exitCode(10 * time.Second)
	b.waitState("serving", 20*time.Second)
	testwait.For(t, 2*time.Duration(lease*float64(time.Second)), "every instance READY again under its id, within 2 lease periods", allReady)
}
