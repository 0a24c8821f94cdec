package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/broker"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// leafSets is how many sets the leaf-node tests send from the hub.
const leafSets = 2000

// TestLeafNodesServeOnce is issue 26's finding 2, with real processes: a hub and two
// leaf nodes, each server with JetStream in a domain of its own, one account; an engine
// on each leaf node. Exactly one serves, the other is refused (exit 3) naming why, and
// every set the hub's client saw acknowledged reads back.
//
//   - domain: both engines name the hub's domain (nats.jetstream.domain): they meet on
//     one lease, and the second is refused by it, as on a single server.
//   - no domain: each engine's JetStream is its own leaf node's, so each would take a
//     lease of its own (before the fix both served, and about half the acknowledged
//     writes read back as not found). The second sees the first answering keyvalue
//     while holding no lease it can see, and is refused naming it.
func TestLeafNodesServeOnce(t *testing.T) {
	for _, tc := range []struct {
		name, natsYAML, refusal string
	}{
		{"domain", "  jetstream: {domain: " + broker.HubDomain + "}\n", "already serves this NATS account"},
		{"no domain", "", "holds no lease in the JetStream of the server this engine is connected to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := natstest.StartLeaves(t, 2)
			a := start(t, "A", engineConfig{NATSURL: l.Nodes[0].URL(), NATSYAML: tc.natsYAML, HTTPPort: testproc.FreePort(t)})
			a.waitState("serving", 30*time.Second)
			idA := a.instanceID()
			b := start(t, "B", engineConfig{NATSURL: l.Nodes[1].URL(), NATSYAML: tc.natsYAML, HTTPPort: testproc.FreePort(t)})
			if state := b.exitOrState("serving", 30*time.Second); state == "serving" {
				idB := b.instanceID()
				acked, lost, by := leafTraffic(t, l.Hub.URL())
				t.Fatalf("both engines serve (A %s on %s, B %s on %s): of %d sets from the hub, %d acknowledged, answered %v; %d acknowledged writes read back wrong or not found",
					idA, broker.LeafDomain(0), idB, broker.LeafDomain(1), leafSets, acked, by, lost)
			}
			if code := b.exitCode(time.Second); code != 3 {
				t.Fatalf("B exited %d, want 3 (another engine serves)", code)
			}
			b.waitLog(tc.refusal, time.Second)
			b.waitLog(idA, time.Second)
			acked, lost, by := leafTraffic(t, l.Hub.URL())
			t.Logf("%d sets from the hub: %d acknowledged, answered %v; %d lost", leafSets, acked, by, lost)
			if acked != leafSets || by[idA] != leafSets {
				t.Errorf("%d of %d sets acknowledged, answered %v; want all by A %s", acked, leafSets, by, idA)
			}
			if lost != 0 {
				t.Errorf("%d acknowledged writes read back wrong or not found", lost)
			}
			a.waitState("serving", time.Second)
		})
	}
}

// leafTraffic sends leafSets sets from a client of the hub, then reads every key whose
// set was acknowledged: it returns how many were acknowledged, how many of those read
// back wrong or not found, and the instances that answered the sets.
func leafTraffic(t *testing.T, url string) (acked, lost int, by map[string]int) {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv := client.NewKeyValue(tr)
	const workers = 8
	var mu sync.Mutex
	by = map[string]int{}
	ok := make([]bool, leafSets)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < leafSets; i += workers {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				body, _ := json.Marshal(protocol.KVSetRequest{Key: fmt.Sprintf("leaf-%d", i), Value: []byte(fmt.Sprint(i))})
				r, err := tr.Request(ctx, protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet), body, nil)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				by[r.Instance]++
				ok[i] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, acknowledged := range ok {
		if !acknowledged {
			continue
		}
		acked++
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, found, err := kv.Get(ctx, fmt.Sprintf("leaf-%d", i))
		cancel()
		if err != nil || !found || string(v) != fmt.Sprint(i) {
			lost++
		}
	}
	return acked, lost, by
}

// TestLeafNodesStartedTogetherServeOnce: two engines with no domain, started at the
// same moment on two JetStream leaf nodes, may both pass the check before the claim;
// then the watch of rivals ends one of them (exit 3, naming the other), and every set
// the hub's client saw acknowledged afterwards reads back.
func TestLeafNodesStartedTogetherServeOnce(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	var procs []*proc
	for i, n := range l.Nodes {
		procs = append(procs, start(t, fmt.Sprintf("E%d", i), engineConfig{NATSURL: n.URL(), HTTPPort: testproc.FreePort(t)}))
	}
	var ended, left *proc
	for ended == nil {
		for i, p := range procs {
			select {
			case <-p.exited:
				ended, left = p, procs[1-i]
			default:
			}
		}
		if ended == nil {
			select {
			case <-procs[0].exited:
			case <-procs[1].exited:
			case <-time.After(30 * time.Second):
				t.Fatal("both engines still run 30 s after they started on two leaf nodes")
			}
		}
	}
	if code := ended.exitCode(time.Second); code != 3 {
		t.Fatalf("%s exited %d, want 3", ended.name, code)
	}
	left.waitState("serving", 30*time.Second)
	ended.waitLog("holds no lease in the JetStream of the server this engine is connected to", time.Second)
	ended.waitLog(left.instanceID(), time.Second)
	acked, lost, by := leafTraffic(t, l.Hub.URL())
	t.Logf("%s ended; %d sets from the hub: %d acknowledged, answered %v; %d lost", ended.name, leafSets, acked, by, lost)
	if acked != leafSets || by[left.instanceID()] != leafSets || lost != 0 {
		t.Errorf("%d of %d sets acknowledged, answered %v, %d lost; want all by %s and none lost", acked, leafSets, by, lost, left.name)
	}
}

// exitOrState waits until the process exits (it returns "exited") or its state is want.
func (p *proc) exitOrState(want string, within time.Duration) string {
	p.t.Helper()
	got := ""
	testwait.For(p.t, within, fmt.Sprintf("%s to exit or reach state %s", p.name, want), func() bool {
		select {
		case <-p.exited:
			got = "exited"
			return true
		default:
		}
		if _, body, err := p.get("/status"); err == nil && strings.Contains(body, `"state": "`+want+`"`) {
			got = want
		}
		return got != ""
	})
	return got
}

// TestLeafNodesHandOver: with the hub's domain named, a rolling deploy from an engine on
// one leaf node to one on the other hands over as on a single server: the new engine
// stands by, serves at the handover, is not ended as a rival by the old one still
// draining (the epoch record names it), and every set acknowledged during the
// handover reads back.
func TestLeafNodesHandOver(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	domain := "  jetstream: {domain: " + broker.HubDomain + "}\n"
	a := start(t, "A", engineConfig{NATSURL: l.Nodes[0].URL(), NATSYAML: domain, Rollout: "v1", Drain: 2, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 30*time.Second)
	b := start(t, "B", engineConfig{NATSURL: l.Nodes[1].URL(), NATSYAML: domain, Rollout: "v2", Drain: 2, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 30*time.Second)
	idB := b.instanceID()

	tr, err := client.NewTransport(natstest.Connect(t, l.Hub.URL()))
	if err != nil {
		t.Fatal(err)
	}
	kv := client.NewKeyValue(tr)
	stop := make(chan struct{})
	done := make(chan []string)
	go func() {
		var acked []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- acked
				return
			default:
			}
			key := fmt.Sprintf("handover-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := kv.Set(ctx, key, []byte(key), 0); err == nil {
				acked = append(acked, key)
			}
			cancel()
		}
	}()
	a.signal(syscall.SIGTERM)
	b.waitState("serving", 30*time.Second)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Errorf("A exited %d after its handover, want 0", code)
	}
	// Three of B's rival periods (lease/4 = 500 ms) after A's end: B still serves.
	select {
	case <-b.exited:
		t.Fatalf("B ended after the handover: %s", b.out.String())
	case <-time.After(2 * time.Second):
	}
	close(stop)
	acked := <-done
	lost := 0
	for _, key := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, found, err := kv.Get(ctx, key)
		cancel()
		if err != nil || !found || string(v) != key {
			lost++
		}
	}
	t.Logf("%d sets acknowledged during the handover to %s, %d lost", len(acked), idB, lost)
	if len(acked) == 0 || lost != 0 {
		t.Errorf("%d acknowledged writes read back wrong or not found, of %d", lost, len(acked))
	}
	b.waitState("serving", time.Second)
}
