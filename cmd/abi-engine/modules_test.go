package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine"
	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// TestModulesListsTheRegistry: `modules` lists a registered instance with its status,
// as a table and as JSON, from a serving engine with discovery on; without a secret it
// is a usage error naming the setting.
func TestModulesListsTheRegistry(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "jwt")
	if err := os.WriteFile(secretFile, []byte("modules-cli-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.NATS.URL = srv.URL()
	c.NATS.JWTSecretFile = secretFile
	c.NATS.Discovery = &config.Discovery{Project: "cli", LeaseSeconds: 30}
	c.HTTP.Listen = ""
	c.Services.KeyValue.Adapter = config.KeyValueMemory
	c.Services.ObjectStorage.Adapter = config.ObjectStorageMemory
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = e.Shutdown(sctx)
	})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	tok, _ := servicetoken.Mint([]byte("modules-cli-secret"), "m", time.Now(), time.Hour)
	cl, err := discoveryclient.New(natstest.Connect(t, srv.URL()), "cli", discoveryclient.StaticToken(tok), 0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := discoveryclient.NewSession(cl, &pb.ModuleDescriptor{ModuleId: "billing", ContractMajor: 2, PackageVersion: "1.4"}, "inst-1", "", nil)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	r := runCLI(t, nil, "modules", "--nats", srv.URL(), "--project", "cli", "--jwt-secret-file", secretFile)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "MODULE") || !strings.Contains(r.stdout, "billing") || !strings.Contains(r.stdout, "inst-1") ||
		!strings.Contains(r.stdout, "STARTING") {
		t.Fatalf("table:\n%s", r.stdout)
	}
	r = runCLI(t, nil, "modules", "--nats", srv.URL(), "--project", "cli", "--jwt-secret-file", secretFile, "--json")
	wantCode(t, r, exitOK)
	var out struct {
		Project   string       `json:"project"`
		Instances []moduleJSON `json:"instances"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Project != "cli" || len(out.Instances) != 1 {
		t.Fatalf("json %q: %v", r.stdout, err)
	}
	if in := out.Instances[0]; in.ModuleID != "billing" || in.ContractMajor != 2 || in.InstanceID != "inst-1" || in.Status != "STARTING" ||
		in.ExpiresIn <= 0 || in.Draining {
		t.Fatalf("instance %+v", in)
	}
	r = runCLI(t, map[string]string{"ABI_NATS_URL": srv.URL()}, "modules", "--project", "cli")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "jwt_secret_file") {
		t.Fatalf("without a secret: %q", r.stderr)
	}
	r = runCLI(t, nil, "modules", "--nats", srv.URL(), "--project", "a.b", "--jwt-secret-file", secretFile)
	wantCode(t, r, exitUsage)
}
