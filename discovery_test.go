package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine"
	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testwait"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

const discoverySecret = "engine-discovery-test-secret"

// discoveryCfg is cfg with the module registry on and the service token's secret.
func discoveryCfg(t *testing.T, url, rollout string) *config.Config {
	t.Helper()
	c := cfg(t, url, "serve", rollout, "jetstream")
	path := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(path, []byte(discoverySecret), 0o600); err != nil {
		t.Fatal(err)
	}
	c.NATS.JWTSecretFile = path
	c.NATS.Discovery = &config.Discovery{Project: "default", LeaseSeconds: 3}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// discoveryCall is one discovery call as the SDK makes it: the service token in the
// header, and "no responders" sent again for up to 5 s (the gap of a handover).
func discoveryCall(nc *nats.Conn, op string, req, resp proto.Message) error {
	tok, err := servicetoken.Mint([]byte(discoverySecret), "module", time.Now(), time.Hour)
	if err != nil {
		return err
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	backoff := 50 * time.Millisecond
	for {
		msg := nats.NewMsg(discovery.Subject("default", op))
		msg.Data = data
		msg.Header.Set(protocol.HeaderAuthToken, tok)
		r, err := nc.RequestMsg(msg, 5*time.Second)
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			time.Sleep(backoff) // the SDK's own backoff between resends
			backoff = min(2*backoff, 500*time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		if err := proto.Unmarshal(r.Data, resp); err != nil {
			return err
		}
		r2 := resp.ProtoReflect()
		if e := r2.Get(r2.Descriptor().Fields().ByNumber(1)).Message(); e.IsValid() {
			return fmt.Errorf("%s: %v", op, e.Interface())
		}
		return nil
	}
}

// TestDiscoveryAcrossAHandover: 50 module instances renewing every lease/3 and a reader calling
// get_module in a loop see no failed call and no instance missing while the serving
// engine hands over to its standby; the registry is the same before and after. The
// standby serves no discovery before it takes over.
func TestDiscoveryAcrossAHandover(t *testing.T) {
	srv := natstest.Start(t)
	a := newEngine(t, discoveryCfg(t, srv.URL(), "v1"))
	load(t, a)
	b := newEngine(t, discoveryCfg(t, srv.URL(), "v2"))
	load(t, b)
	if b.State() != engine.StateStandby {
		t.Fatalf("b: %s", b.State())
	}
	subscribers := func() int {
		sz, err := srv.Raw().Subsz(&server.SubszOptions{Subscriptions: true, Test: discovery.Subject("default", discovery.OpRegister)})
		if err != nil {
			t.Fatal(err)
		}
		return len(sz.Subs)
	}
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscribers of register with a serving engine and a standby, want 1 (the standby serves none)", n)
	}
	nc := natstest.Connect(t, srv.URL())
	const modules = 50
	token := "0123456789abcdef0123456789abcdef"
	for i := range modules {
		id := fmt.Sprintf("inst-%d", i)
		req := &pb.RegisterRequest{InstanceId: id, LeaseToken: token,
			Descriptor_: &pb.ModuleDescriptor{ModuleId: "mod", ContractMajor: 1}}
		if err := discoveryCall(nc, discovery.OpRegister, req, &pb.RegisterResponse{}); err != nil {
			t.Fatal(err)
		}
		if err := discoveryCall(nc, discovery.OpRenew, &pb.RenewRequest{InstanceId: id, LeaseToken: token, Initialized: true}, &pb.RenewResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []string {
		var r pb.GetModuleResponse
		if err := discoveryCall(nc, discovery.OpGetModule, &pb.GetModuleRequest{ModuleId: "mod", ContractMajor: 1}, &r); err != nil {
			t.Errorf("get_module: %v", err)
			return nil
		}
		var out []string
		for _, in := range r.Instances {
			out = append(out, in.InstanceId+"="+in.Status)
		}
		return out
	}
	before := fmt.Sprint(list())
	var fails, reads, renews atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(s string) {
		fails.Add(1)
		mu.Lock()
		failures = append(failures, s)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range modules {
		wg.Go(func() {
			id := fmt.Sprintf("inst-%d", i)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second): // lease/3
				}
				if err := discoveryCall(nc, discovery.OpRenew, &pb.RenewRequest{InstanceId: id, LeaseToken: token, Initialized: true}, &pb.RenewResponse{}); err != nil {
					fail("renew " + id + ": " + err.Error())
				}
				renews.Add(1)
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var r pb.GetModuleResponse
			if err := discoveryCall(nc, discovery.OpGetModule, &pb.GetModuleRequest{ModuleId: "mod", ContractMajor: 1}, &r); err != nil {
				fail("get_module: " + err.Error())
			} else if len(r.Instances) != modules {
				fail(fmt.Sprintf("get_module listed %d instances", len(r.Instances)))
			}
			reads.Add(1)
		}
	})
	testwait.For(t, 20*time.Second, "reads and a round of renewals before the handover", func() bool {
		return reads.Load() >= 20 && renews.Load() >= modules
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	n, r := reads.Load(), renews.Load()
	testwait.For(t, 20*time.Second, "reads and two rounds of renewals after the handover", func() bool {
		return reads.Load() >= n+20 && renews.Load() >= r+2*modules
	})
	close(stop)
	wg.Wait()
	if fails.Load() != 0 {
		t.Fatalf("%d failed calls across the handover: %v", fails.Load(), failures)
	}
	if after := fmt.Sprint(list()); after != before {
		t.Fatalf("registry before %s, after %s", before, after)
	}
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscribers of register after the handover, want 1", n)
	}
}

// TestDiscoveryGoSessionComesBackAfterTheEngineWasAway: a Go module (client/discovery
// Session) is READY; no engine serves for longer than the discovery lease; once one
// serves again, the session's renew gets LEASE_EXPIRED and it registers again under
// the same instance id, READY again within 2 lease periods. Close unregisters it.
func TestDiscoveryGoSessionComesBackAfterTheEngineWasAway(t *testing.T) {
	srv := natstest.Start(t)
	c := discoveryCfg(t, srv.URL(), "")
	c.NATS.Discovery.LeaseSeconds = 1
	a := newEngine(t, c)
	load(t, a)
	nc := natstest.Connect(t, srv.URL())
	tok, err := servicetoken.Mint([]byte(discoverySecret), "gomodule", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := discoveryclient.New(nc, "default", discoveryclient.StaticToken(tok), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s, err := discoveryclient.NewSession(cl, &pb.ModuleDescriptor{ModuleId: "go.module", ContractMajor: 1}, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.SetInitialized(ctx); err != nil || s.Status() != "READY" {
		t.Fatalf("initialized: %v, %s", err, s.Status())
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := a.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	away := time.Now()
	testwait.For(t, 10*time.Second, "longer than the discovery lease without an engine", func() bool { return time.Since(away) > 1500*time.Millisecond })
	b := newEngine(t, discoveryCfg(t, srv.URL(), ""))
	load(t, b)
	testwait.For(t, 10*time.Second, "the same instance READY again", func() bool {
		ins, err := cl.GetModule(ctx, "go.module", 1)
		return err == nil && len(ins) == 1 && ins[0].InstanceId == s.InstanceID() && ins[0].Status == "READY"
	})
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	mfs, err := b.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var instances float64 = -1
	for _, mf := range mfs {
		if mf.GetName() == "abi_engine_discovery_instances" {
			instances = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if instances != 1 {
		t.Fatalf("abi_engine_discovery_instances = %v, want 1", instances)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetModule(ctx, "go.module", 1); !errors.Is(err, discoveryclient.ErrModuleNotFound) {
		t.Fatalf("after Close: %v, want MODULE_NOT_FOUND", err)
	}
}
