package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/internal/broker"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
)

// TestDoctorReadsLeafNodes: doctor on a leaf node of a hub whose servers each run
// JetStream in a domain of their own. It does not count the hub and the other leaf
// node as a cluster (no replicas advice a single-node leaf cannot take, and R3 cannot
// be placed there), and it fails the split, each way it shows: no domain configured
// while the account has several; another domain holding a lease bucket; an engine
// serving keyvalue that the configured domain's lease does not name.
func TestDoctorReadsLeafNodes(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	url := l.Nodes[1].URL()
	dir := t.TempDir()
	t.Chdir(dir)

	r := runCLI(t, nil, "doctor", "--nats", url)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "jetstream domain", "FAIL", "no nats.jetstream.domain", "3 domains (hub, leaf1, leaf2)", "here domain leaf2",
		"fix: set nats.jetstream.domain")
	wantVerdict(t, r, "lease bucket", "OK", "R1")
	wantNotContains(t, r.stdout, "cluster of", "lease_replicas: 3")

	r3 := writeFile(t, dir, "r3.yaml", "nats:\n  engine: {lease_replicas: 3}\n  jetstream: {domain: leaf2}\n")
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", r3)
	wantVerdict(t, r, "lease bucket", "FAIL", "lease_replicas is 3, but domain leaf2 has 1 JetStream server(s)")

	// Named, with nothing in the other domains: a warning that every engine must name it.
	hub := writeFile(t, dir, "hub.yaml", "nats:\n  jetstream: {domain: hub}\n")
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", hub)
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "jetstream", "OK", "in domain hub")
	wantVerdict(t, r, "jetstream domain", "WARN", "in domain hub", "leaf1, leaf2 too")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A split left a keyvalue bucket in leaf node 0's own domain.
	leaf0, err := jsdomain.New(natstest.Connect(t, l.Nodes[0].URL()), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf0.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ABI_KV"}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", hub)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "jetstream domain", "FAIL", "domain leaf1 holds KV_ABI_KV", "nats stream rm STREAM --js-domain leaf1")

	// An engine took a lease in leaf node 0's own domain.
	s, err := jetstreamstore.Open(ctx, natstest.Connect(t, l.Nodes[0].URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	other := lease.ThisProcess("0123456789abcdef0123456789abcdef", "9.9.9", "", time.Now())
	if _, err := s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", hub)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "jetstream domain", "FAIL", "domain leaf1 holds a lease bucket ABI_ENGINE too", other.InstanceID,
		"nats kv del ABI_ENGINE --js-domain leaf1")

	// And serves keyvalue, which the hub's lease does not name.
	sc := natstest.Connect(t, l.Nodes[0].URL())
	svc, err := micro.AddService(sc, micro.Config{
		Name: "keyvalue", Version: "9.9.9", Metadata: map[string]string{"instance_id": other.InstanceID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The interest crosses the hub to the other leaf node on its own time.
	leaf := natstest.Connect(t, url)
	testwait.For(t, 10*time.Second, "keyvalue answers through the other leaf node", func() bool {
		_, err := leaf.Request("$SRV.INFO.keyvalue", nil, time.Second)
		return err == nil
	})
	defer svc.Stop() //nolint:errcheck
	hubJS, err := jsdomain.New(natstest.Connect(t, l.Hub.URL()), broker.HubDomain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jetstreamstore.Open(ctx, hubJS.Conn(), jetstreamstore.Config{Domain: broker.HubDomain}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", hub)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "jetstream domain", "FAIL", "engine "+other.InstanceID+" serves keyvalue", "the lease in domain hub names none")
}

func wantNotContains(t *testing.T, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(out, s) {
			t.Errorf("output says %q:\n%s", s, out)
		}
	}
}

// TestStatusReadsTheDomainsLease: status, on a leaf node, reads the lease of the
// configured domain (the hub's), not the leaf node's own JetStream.
func TestStatusReadsTheDomainsLease(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := jetstreamstore.Open(ctx, natstest.Connect(t, l.Hub.URL()), jetstreamstore.Config{Domain: broker.HubDomain})
	if err != nil {
		t.Fatal(err)
	}
	h := lease.ThisProcess("0123456789abcdef0123456789abcdef", "9.9.9", "", time.Now())
	if _, err := s.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	url := l.Nodes[1].URL()
	r := runCLI(t, nil, "status", "--nats", url)
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "bucket ABI_ENGINE does not exist")
	writeFile(t, dir, "abi-engine.yaml", "nats:\n  jetstream: {domain: hub}\n")
	r = runCLI(t, nil, "status", "--nats", url)
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, h.InstanceID)
}
