package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// Workloads (see the package doc for what each does).
const (
	WorkloadSetGet = "set-get"
	WorkloadGet    = "get"
	WorkloadSet    = "set"
	WorkloadMixed  = "mixed"
	WorkloadPutGet = "put-get"
	WorkloadPut    = "put"
)

// workloads lists the workloads of each service.
var workloads = map[string][]string{
	protocol.KeyValue:      {WorkloadSetGet, WorkloadGet, WorkloadSet, WorkloadMixed},
	protocol.ObjectStorage: {WorkloadPutGet, WorkloadGet, WorkloadPut},
}

// Limits of a Config.
const (
	// MinPayloadBytes is the smallest value: the tag that makes every value of a run
	// unique takes 16 bytes.
	MinPayloadBytes = tagLen
	// MaxConcurrency bounds the workers; the value tag has room for 2^24 of them.
	MaxConcurrency = 1 << 16
)

// Config says what load to drive. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Service is protocol.KeyValue ("keyvalue") or protocol.ObjectStorage
	// ("object_storage").
	Service string `json:"service"`
	// Workload is one of the service's workloads (Workload* constants).
	Workload string `json:"workload"`
	// Concurrency is the number of workers, each with one call in flight.
	Concurrency int `json:"concurrency"`
	// Duration ends the run this long after it started; calls in flight complete.
	Duration time.Duration `json:"duration_ns"`
	// Count ends the run after this many operations, counted over all workers.
	// With neither Duration nor Count set, the run lasts until ctx ends or StopOn's
	// channel closes.
	Count int64 `json:"count"`
	// PayloadBytes is the size of every value written.
	PayloadBytes int `json:"payload_bytes"`
	// Keys is the size of the key space. The keys are seeded first by the "get"
	// workloads. In "set-get" and "put-get" each worker owns Keys/Concurrency of them,
	// so Keys must be at least Concurrency.
	Keys int `json:"keys"`
	// Timeout bounds every call, the Transport's retries included.
	Timeout time.Duration `json:"timeout_ns"`
	// Seed makes the values and the random key choices reproducible.
	Seed int64 `json:"seed"`
	// KeyPrefix starts every key (keyvalue) and is the prefix of every object
	// (object_storage). Empty: a random one per run, so runs never see each other's
	// keys.
	KeyPrefix string `json:"key_prefix"`
	// Cleanup deletes every key of the key space after the run.
	Cleanup bool `json:"cleanup"`
}

// DefaultConfig is a 10 s keyvalue set-get run with 16 workers, 64-byte values over 1024
// keys, a 10 s call timeout (the client's default, which leaves the Transport its whole
// retry window) and cleanup.
func DefaultConfig() Config {
	return Config{
		Service:      protocol.KeyValue,
		Workload:     WorkloadSetGet,
		Concurrency:  16,
		Duration:     10 * time.Second,
		PayloadBytes: 64,
		Keys:         1024,
		Timeout:      10 * time.Second,
		Cleanup:      true,
	}
}

// Validate reports the first field that is out of range, naming it and its value.
func (c Config) Validate() error {
	ws, ok := workloads[c.Service]
	if !ok {
		return fmt.Errorf("bench: service %q is not one of %s, %s", c.Service, protocol.KeyValue, protocol.ObjectStorage)
	}
	if !slices.Contains(ws, c.Workload) {
		return fmt.Errorf("bench: workload %q is not one of %s (service %s)", c.Workload, strings.Join(ws, ", "), c.Service)
	}
	if err := c.validateLoad(); err != nil {
		return err
	}
	if c.Keys < 1 {
		return fmt.Errorf("bench: keys %d must be at least 1", c.Keys)
	}
	if c.ownsKeys() && c.Keys < c.Concurrency {
		return fmt.Errorf("bench: keys %d must be at least concurrency %d in workload %s, where each worker owns its keys", c.Keys, c.Concurrency, c.Workload)
	}
	return nil
}

// validateLoad checks what RawNATS uses too.
func (c Config) validateLoad() error {
	switch {
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("bench: concurrency %d must be between 1 and %d", c.Concurrency, MaxConcurrency)
	case c.Duration < 0:
		return fmt.Errorf("bench: duration %s is negative", c.Duration)
	case c.Count < 0:
		return fmt.Errorf("bench: count %d is negative", c.Count)
	case c.Duration > 0 && c.Count > 0:
		return fmt.Errorf("bench: duration %s and count %d are both set; give one of them", c.Duration, c.Count)
	case c.PayloadBytes < MinPayloadBytes:
		return fmt.Errorf("bench: payload_bytes %d must be at least %d (the unique tag of every value)", c.PayloadBytes, MinPayloadBytes)
	case c.Timeout <= 0:
		return fmt.Errorf("bench: timeout %s must be positive", c.Timeout)
	}
	return nil
}

// ownsKeys reports whether each worker writes and reads only its own keys, so it knows
// what every read must return.
func (c Config) ownsKeys() bool {
	return c.Workload == WorkloadSetGet || c.Workload == WorkloadPutGet
}

// seeded reports whether the workload writes the whole key space before it starts.
func (c Config) seeded() bool { return c.Workload == WorkloadGet }
