package sessions

import (
	"context"
	"fmt"
	"github.com/abi-engine/engine/internal/testwait"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
)

// A queue member drained under load loses no request: 64 requesters keep calling a
// queue group while one member, with a backlog, is stopped; every request is answered,
// and none sent after StopDelivery returned reaches the stopped member.
func TestStopDeliveryLosesNothingUnderLoad(t *testing.T) {
	srv := natstest.Start(t)
	callers := connect(t, srv)
	for round := range 5 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			stopDeliveryRound(t, srv, callers, round)
		})
	}
}

func stopDeliveryRound(t *testing.T, srv *natstest.Server, callers *nats.Conn, round int) {
	const requesters = 64
	subject := fmt.Sprintf("load.%d", round)
	ncA, ncB := connect(t, srv), connect(t, srv)

	gate := make(chan struct{})
	var handledByA atomic.Int64
	subA, err := ncA.QueueSubscribe(subject, "workers", func(m *nats.Msg) {
		<-gate // builds a backlog in A's pending queue
		handledByA.Add(1)
		_ = m.Respond([]byte("A"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ncB.QueueSubscribe(subject, "workers", func(m *nats.Msg) { _ = m.Respond([]byte("B")) }); err != nil {
		t.Fatal(err)
	}
	if err := ncA.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}

	var (
		stopped   atomic.Bool
		wg        sync.WaitGroup
		lost      atomic.Int64
		misrouted atomic.Int64
		answered  atomic.Int64
	)
	for range requesters {
		wg.Go(func() {
			sentAfter := 0
			for sentAfter < 3 {
				isAfter := stopped.Load()
				reply, err := callers.Request(subject, nil, 20*time.Second)
				switch {
				case err != nil:
					lost.Add(1)
				case isAfter && string(reply.Data) == "A":
					misrouted.Add(1)
				default:
					answered.Add(1)
				}
				if isAfter {
					sentAfter++
				}
			}
		})
	}
	testwait.For(t, 10*time.Second, "a backlog on the member being stopped", func() bool {
		n, _, _ := subA.Pending()
		return n >= 8
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := StopDelivery(ctx, ncA, subA)
	if err != nil {
		t.Fatal(err)
	}
	stopped.Store(true)
	// A burst right after the return, faster than the requesters: none may reach A.
	burst := burstAfterStop(t, callers, subject)
	if d.Finished() {
		t.Fatal("delivery finished while A's callback is held")
	}
	close(gate)
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !d.Finished() || subA.IsValid() {
		t.Fatal("Wait returned before the subscription was drained")
	}
	wg.Wait()
	if lost.Load() != 0 || misrouted.Load() != 0 {
		t.Fatalf("lost %d requests, %d sent after the stop reached A (answered %d)", lost.Load(), misrouted.Load(), answered.Load())
	}
	if got := <-burst; got != "" {
		t.Fatalf("a request sent right after StopDelivery returned was answered by %s", got)
	}
	if handledByA.Load() < 8 {
		t.Fatalf("A handled %d requests, want its backlog of at least 8", handledByA.Load())
	}
}

func TestStopDeliveryOnAClosedConnection(t *testing.T) {
	srv := natstest.Start(t)
	nc := connect(t, srv)
	sub, err := nc.Subscribe("x", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	d, err := StopDelivery(context.Background(), nc, sub)
	if err == nil {
		t.Fatal("StopDelivery on a closed connection reported the UNSUB confirmed")
	}
	if !d.Finished() {
		t.Fatal("a closed connection delivers nothing more, so delivery is over")
	}
	if err := d.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// burstAfterStop publishes requests back to back and reports "A" if any reached the
// stopped member, "" once all were answered by the other.
func burstAfterStop(t *testing.T, nc *nats.Conn, subject string) <-chan string {
	const n = 200
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, n)
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := nc.PublishRequest(subject, inbox, nil); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan string, 1)
	go func() {
		defer func() { _ = sub.Unsubscribe() }()
		for range n {
			select {
			case m := <-replies:
				if string(m.Data) == "A" {
					out <- "A"
					return
				}
			case <-time.After(20 * time.Second):
				out <- "nobody (timeout)"
				return
			}
		}
		out <- ""
	}()
	return out
}
