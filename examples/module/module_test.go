package module_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/abi-engine/engine"
	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/examples/module"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testwait"
)

// TestTheExampleModuleRegistersServesAndUnregisters runs the example against an
// engine with discovery on: READY and answering echo while it runs, gone from the
// registry once it stopped.
func TestTheExampleModuleRegistersServesAndUnregisters(t *testing.T) {
	srv := natstest.Start(t)
	secret := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(secret, []byte("example-module-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.NATS.URL, c.NATS.JWTSecretFile, c.HTTP.Listen = srv.URL(), secret, ""
	c.NATS.Discovery = &config.Discovery{Project: "default", LeaseSeconds: 20}
	c.Services.KeyValue.Adapter, c.Services.ObjectStorage.Adapter = config.KeyValueMemory, config.ObjectStorageMemory
	e, err := engine.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	tok, _ := servicetoken.Mint([]byte("example-module-secret"), "example", time.Now(), time.Hour)
	nc := natstest.Connect(t, srv.URL())
	cl, err := discoveryclient.New(nc, "default", discoveryclient.StaticToken(tok), 0)
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- module.Run(run, nc, cl, started) }()
	id := testwait.Recv(t, started, 10*time.Second, "the module initialized")
	ins, err := cl.GetModule(ctx, module.ID, 1)
	if err != nil || len(ins) != 1 || ins[0].InstanceId != id || ins[0].Status != "READY" {
		t.Fatalf("get_module: %v %v", ins, err)
	}
	reply, err := nc.Request(module.Subject("default", id), []byte("hi"), 5*time.Second)
	if err != nil || string(reply.Data) != "hi" {
		t.Fatalf("echo: %v %v", reply, err)
	}
	stop()
	if err := testwait.Recv(t, done, 10*time.Second, "the module stopped"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetModule(ctx, module.ID, 1); !errors.Is(err, discoveryclient.ErrModuleNotFound) {
		t.Fatalf("after the stop: %v", err)
	}
}
