package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStandbyFromTheEnvironment: ABI_ENGINE_STANDBY sets nats.engine.standby (a process
// that step-down --stay starts again is a hot standby through it), and a bad value is
// named.
func TestStandbyFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte("nats: {url: nats://127.0.0.1:4222}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvStandby {
				return v
			}
			return ""
		}
	}
	c, err := Load(path, env("hot"))
	if err != nil || !c.NATS.Engine.HotStandby() {
		t.Fatalf("Load = %+v, %v; want a hot standby", c.NATS.Engine, err)
	}
	if c, err := Load(path, env("")); err != nil || c.NATS.Engine.Standby != StandbyOff {
		t.Fatalf("default: %v, %v", c.NATS.Engine.Standby, err)
	}
	if _, err := Load(path, env("warm")); err == nil {
		t.Fatal("ABI_ENGINE_STANDBY=warm was accepted")
	}
}
