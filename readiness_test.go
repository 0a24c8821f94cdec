package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
)

// A standby that takes the lease with a member that cannot serve (here the keyvalue
// store's epoch check subject holds a value no engine writes, which no repair can go
// by) is a holder: /status says serving and names the member and why, /readyz fails,
// and /healthz fails once that has lasted a lease period. (Before, the holder showed
// the standby's state and answered ready, so a rollout went on and removed the old
// engine while nobody answered keyvalue: issue 26, finding 5.)
func TestHolderWithAMemberThatCannotServeIsNotReady(t *testing.T) {
	srv := natstest.Start(t)
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"))
	load(t, a)
	testwait.For(t, 10*time.Second, "v1 serving", func() bool { return a.State() == engine.StateServing })
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"))
	load(t, b)
	testwait.For(t, 10*time.Second, "v2 standing by", func() bool { return b.State() == engine.StateStandby })

	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &nats.Msg{Subject: "$KV.ABI_KV.abi.epoch.1", Data: []byte("garbage"), Header: nats.Header{}}
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "v2 not ready, naming the keyvalue member", func() bool {
		return errors.Is(b.Readiness(), engine.ErrMemberCannotServe)
	})
	if err := b.Readiness(); !strings.Contains(err.Error(), "primary/keyvalue") || !strings.Contains(err.Error(), "garbage") {
		t.Fatalf("Readiness = %v, want it to name primary/keyvalue and why", err)
	}
	st := b.Status().(engine.Status)
	if st.State != engine.StateServing || len(st.Failing) == 0 || st.Failing[0].Member != "primary/keyvalue" || st.NotReady == "" {
		t.Fatalf("/status = state %s, failing %+v, not_ready %q; want serving, primary/keyvalue failing", st.State, st.Failing, st.NotReady)
	}
	if err := b.Healthy(); err != nil && time.Since(st.Failing[0].Since) < time.Duration(b.Config().NATS.Engine.LeaseSeconds)*time.Second {
		t.Fatalf("Healthy before a lease period of failing = %v", err)
	}
	testwait.For(t, 15*time.Second, "v2 unhealthy after a lease period", func() bool { return b.Healthy() != nil })
	if err := b.Healthy(); !strings.Contains(err.Error(), "primary/keyvalue") {
		t.Fatalf("Healthy = %v, want it to name the member", err)
	}
}
