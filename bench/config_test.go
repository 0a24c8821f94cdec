package bench

import (
	"testing"
	"time"

	"github.com/abi-engine/engine/protocol"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for service, ws := range workloads {
		for _, w := range ws {
			c := DefaultConfig()
			c.Service, c.Workload = service, w
			if err := c.Validate(); err != nil {
				t.Errorf("%s %s: %v", service, w, err)
			}
		}
	}
}

func TestConfigValidateNamesFieldAndValue(t *testing.T) {
	cases := []struct {
		change func(*Config)
		want   []string
	}{
		{func(c *Config) { c.Service = "queue" }, []string{`service "queue"`, "keyvalue", "object_storage"}},
		{func(c *Config) { c.Workload = "put-get" }, []string{`workload "put-get"`, "set-get", "keyvalue"}},
		{func(c *Config) { c.Service, c.Workload = protocol.ObjectStorage, WorkloadMixed }, []string{`workload "mixed"`, "object_storage"}},
		{func(c *Config) { c.Concurrency = 0 }, []string{"concurrency 0"}},
		{func(c *Config) { c.Concurrency = MaxConcurrency + 1 }, []string{"concurrency 65537"}},
		{func(c *Config) { c.Duration = -time.Second }, []string{"duration -1s"}},
		{func(c *Config) { c.Duration, c.Count = 0, -1 }, []string{"count -1"}},
		{func(c *Config) { c.Count = 10 }, []string{"duration 10s", "count 10", "both"}},
		{func(c *Config) { c.PayloadBytes = 8 }, []string{"payload_bytes 8", "16"}},
		{func(c *Config) { c.Keys = 0 }, []string{"keys 0"}},
		{func(c *Config) { c.Keys, c.Concurrency = 8, 16 }, []string{"keys 8", "concurrency 16", "set-get"}},
		{func(c *Config) { c.Timeout = 0 }, []string{"timeout 0s"}},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil {
			t.Errorf("%+v validated", cfg)
			continue
		}
		for _, w := range c.want {
			contains(t, err.Error(), w)
		}
	}
	// Fewer keys than workers is fine where workers share keys.
	cfg := DefaultConfig()
	cfg.Workload, cfg.Keys = WorkloadMixed, 1
	if err := cfg.Validate(); err != nil {
		t.Errorf("mixed over one key: %v", err)
	}
	// Neither count nor duration: until stopped.
	cfg.Duration = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("unbounded run: %v", err)
	}
}
