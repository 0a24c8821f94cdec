package jsbucket_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureAsksAgainWhatTheBrokerLeftUnanswered: a JetStream API request that reaches
// a cluster while the stream has no leader (its node lost, the election under way) is
// never answered, and a caller that waits for it waits its whole deadline. Ensure asks
// again instead: on a 3-node cluster a backend probe's lost stream info held the
// bucket for its 5 s, and the holder's Serve, which checks the bucket before it adopts
// the epoch, waited behind it with the stream long led again (cluster-node-loss).
//
// The broker the bucket's handle talks to relays the JetStream API to a JetStream
// server and leaves the first stream info request unanswered, as a leaderless stream
// does.
func TestEnsureAsksAgainWhatTheBrokerLeftUnanswered(t *testing.T) {
	store := natstest.Start(t)
	front := natstest.Start(t, natstest.WithoutJetStream())
	back := natstest.Connect(t, store.URL())
	var drop, dropped, relayed atomic.Int32
	relay := natstest.Connect(t, front.URL())
	if _, err := relay.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, "$JS.API.STREAM.INFO.KV_B") && drop.Add(-1) >= 0 {
			dropped.Add(1)
			return
		}
		resp, err := back.RequestMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}, 10*time.Second)
		if err != nil {
			t.Errorf("relay %s: %v", m.Subject, err)
			return
		}
		relayed.Add(1)
		if err := m.RespondMsg(&nats.Msg{Header: resp.Header, Data: resp.Data}); err != nil {
			t.Errorf("relay the answer to %s: %v", m.Subject, err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := relay.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(natstest.Connect(t, front.URL()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsbucket.Open(ctxFor(t), js, kvSpec("B"))
	if err != nil {
		t.Fatal(err)
	}

	drop.Store(1)
	before := relayed.Load()
	// Well past one attempt, well short of nats.go's 5 s: without asking again, Ensure
	// waits for the lost answer until this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if recreated, err := b.Ensure(ctx); recreated || err != nil {
		t.Fatalf("Ensure with its first stream info left unanswered = %v %v, want the bucket found", recreated, err)
	}
	if dropped.Load() != 1 || relayed.Load() == before {
		t.Fatalf("%d request(s) left unanswered, %d relayed: Ensure did not ask again", dropped.Load(), relayed.Load()-before)
	}
}
