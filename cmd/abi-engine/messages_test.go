package main

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease"
)

// TestProcessHotStandbyNamesItsOwnRollout: a hot standby beside an engine of its own
// rollout says so, not that "another rollout" holds the lease.
func TestProcessHotStandbyNamesItsOwnRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	env := []string{config.EnvRolloutID + "=v1", config.EnvStandby + "=hot"}
	first := startEngine(t, sharedEngineConfig(srv.URL()), env...)
	first.waitReady(t)
	holder := first.status(t).InstanceID
	second := startEngine(t, sharedEngineConfig(srv.URL()), env...)
	testwait.For(t, 60*time.Second, "the hot standby's standing_by line", func() bool {
		return strings.Contains(second.stderr.String(), `"event":"standing_by"`)
	})
	out := second.stderr.String()
	wantContains(t, "the hot standby's log", out, "an engine of this rollout holds the engine lease: standing by (hot standby)",
		`"holder":"`+holder)
	if strings.Contains(out, "another rollout holds") {
		t.Errorf("the hot standby says another rollout holds the lease, although it is its own:\n%s", out)
	}
	second.signal(t, syscall.SIGTERM)
	if code := second.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the standby exited %d after SIGTERM, want 0:\n%s", code, second.stderr)
	}
	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the holder exited %d after SIGTERM, want 0:\n%s", code, first.stderr)
	}
}

// brokeredEngine is an ended engine that says which broker it used.
type brokeredEngine struct {
	*fakeEngine
	url string
}

func (b brokeredEngine) NATSURL() string { return b.url }

// TestLostLeaseNamesTheNewHolder: an engine that lost its lease without learning to
// whom (deleted, then created by another before its own create) exits naming the
// holder the lease now has, as status shows it, not "holder unknown".
func TestLostLeaseNamesTheNewHolder(t *testing.T) {
	srv := natstest.Start(t)
	holder := servingEngine(t, srv.URL())
	cfg, err := config.Load("", nil, config.NATSURLFlag(srv.URL()), config.RoleFlag(string(config.RoleClient)))
	if err != nil {
		t.Fatal(err)
	}
	ended := brokeredEngine{fakeEngine: newFakeEngine(), url: srv.URL()}
	err = nameLostHolder(context.Background(), cfg, ended, &lease.LostError{})
	var lost *lease.LostError
	if !errors.As(err, &lost) || lost.Holder.InstanceID != holder.InstanceID() {
		t.Fatalf("got %v, want the lease lost to %s", err, holder.InstanceID())
	}
	wantContains(t, "the error", err.Error(), "another engine took the engine lease: "+holder.InstanceID())

	// Any other end is left as it was.
	other := errors.New("something else")
	if got := nameLostHolder(context.Background(), cfg, ended, other); got != other {
		t.Errorf("got %v, want the error unchanged", got)
	}
}

// TestProcessNATSURLWithoutAScheme: --nats host:port, as the NATS tools take it, is
// nats://host:port, for run and for the operator commands.
func TestProcessNATSURLWithoutAScheme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	bare := strings.TrimPrefix(srv.URL(), "nats://")
	eng := startEngine(t, "nats: {url: \""+bare+"\", engine: {lease_seconds: 2, drain_seconds: 1}}\n")
	eng.waitReady(t)
	id := eng.status(t).InstanceID
	code, out, errOut := runBinary(t, nil, "status", "--nats", bare)
	if code != exitOK {
		t.Fatalf("status --nats %s: exit %d\n%s%s", bare, code, out, errOut)
	}
	wantContains(t, "status", out, "held by "+id)
	code, out, errOut = runBinary(t, nil, "call", "keyvalue", "exists", `{"key":"k"}`, "--nats", bare)
	if code != exitOK {
		t.Fatalf("call --nats %s: exit %d\n%s%s", bare, code, out, errOut)
	}
	eng.signal(t, syscall.SIGTERM)
	if code := eng.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the engine exited %d after SIGTERM, want 0:\n%s", code, eng.stderr)
	}
}
