package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestBenchSignsServiceTokens: against an engine with a secret, bench without one
// fails every call UNAUTHENTICATED; with --jwt-secret-file, or ABI_JWT_SECRET_FILE,
// every call succeeds.
func TestBenchSignsServiceTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("bench test secret, long enough!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	servingEngine(t, srv.URL(), func(c *config.Config) { c.NATS.JWTSecretFile = file })
	bench := []string{"bench", "--nats", srv.URL(), "--count", "50", "--concurrency", "2"}

	r := runCLI(t, nil, bench...)
	wantCode(t, r, exitRuntime)
	wantContains(t, "stdout and stderr", r.stdout+r.stderr, "UNAUTHENTICATED")

	r = runCLI(t, nil, append(bench, "--jwt-secret-file", file)...)
	wantCode(t, r, exitOK)
	r = runCLI(t, map[string]string{config.EnvJWTSecretFile: file}, bench...)
	wantCode(t, r, exitOK)
	r = runCLI(t, map[string]string{config.EnvJWTSecretFile: file}, "call", "keyvalue", "exists", `{"key":"k"}`, "--nats", srv.URL())
	wantCode(t, r, exitOK)
}
