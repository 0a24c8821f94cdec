package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/internal/natstest"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// statusJSON is the engine's /status body, decoded as a client of it would.
func statusJSON(t *testing.T, s any) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStatusCountsDiscoveryInstances: with nats.discovery on, /status has
// discovery: {project, instances}, the live instances the serving engine last read or
// wrote (3 registered, then 2 after an unregister), and the request metrics count the
// member's calls; without it, no discovery key.
func TestStatusCountsDiscoveryInstances(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, discoveryCfg(t, srv.URL(), ""))
	load(t, e)
	disc := func() map[string]any {
		t.Helper()
		d, ok := statusJSON(t, e.Status())["discovery"].(map[string]any)
		if !ok {
			t.Fatalf("/status has no discovery object: %+v", statusJSON(t, e.Status()))
		}
		return d
	}
	if d := disc(); d["project"] != "default" || d["instances"] != float64(0) {
		t.Fatalf("before any register: %v, want project default, 0 instances", d)
	}
	nc := natstest.Connect(t, srv.URL())
	const token = "0123456789abcdef0123456789abcdef"
	for i := range 3 {
		req := &pb.RegisterRequest{InstanceId: fmt.Sprintf("inst-%d", i), LeaseToken: token,
			Descriptor_: &pb.ModuleDescriptor{ModuleId: "mod", ContractMajor: 1}}
		if err := discoveryCall(nc, discovery.OpRegister, req, &pb.RegisterResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := disc(); d["instances"] != float64(3) {
		t.Fatalf("after 3 registers: %v, want 3 instances", d)
	}
	if err := discoveryCall(nc, discovery.OpUnregister, &pb.UnregisterRequest{InstanceId: "inst-1", LeaseToken: token}, &pb.UnregisterResponse{}); err != nil {
		t.Fatal(err)
	}
	if d := disc(); d["instances"] != float64(2) {
		t.Fatalf("after an unregister: %v, want 2 instances", d)
	}
	// The member's calls are counted with the services' (abi_engine_requests_total).
	metrics := scrape(t, e)
	for _, want := range []string{
		fmt.Sprintf(`abi_engine_requests_total{code="OK",operation=%q,service="discovery"} 3`, discovery.OpRegister),
		fmt.Sprintf(`abi_engine_requests_total{code="OK",operation=%q,service="discovery"} 1`, discovery.OpUnregister),
		fmt.Sprintf(`abi_engine_request_duration_seconds_count{operation=%q,service="discovery"} 3`, discovery.OpRegister),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	off := newEngine(t, cfg(t, srv.URL(), "client", "", "jetstream"))
	load(t, off)
	if _, ok := statusJSON(t, off.Status())["discovery"]; ok {
		t.Fatalf("an engine without nats.discovery has a discovery object in /status: %+v", statusJSON(t, off.Status()))
	}
}
