package sessions

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// Killing a session actor loses that session and nothing else: its next call is
// NOT_FOUND, the other sessions go on.
func TestASessionActorCrashLosesOnlyItsSession(t *testing.T) {
	srv := smallBroker(t)
	h := startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers()})
	c := newClient(t, connect(t, srv), testPrefix)
	victim, _ := c.open("echo", nil, 0)
	other, _ := c.open("echo", nil, 0)
	for _, id := range []string{victim.ID, other.ID} {
		if err := c.write(id, 0, []byte("first ")); err != nil {
			t.Fatal(err)
		}
	}

	restarts := countRestarts(t, engineOf(h))
	engineOf(h).Send(h.SessionPID(victim.ID), actors.Kill{Reason: "chaos"})
	wantCode(t, c.write(victim.ID, 1, []byte("second")), protocol.NotFound)
	testwait.For(t, 10*time.Second, "the crash handled", func() bool { return restarts() == 1 })

	if err := c.write(other.ID, 1, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.start(other.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.readAll(other.ID)
	if err != nil || string(got) != "first second" {
		t.Fatalf("the other session read %q, %v", got, err)
	}
	_ = c.close(other.ID)
	if n := h.Sessions(); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

// Killing the host actor under traffic fails no call: the fresh actor carries on with
// the subscriptions and sessions the host holds.
func TestAHostActorCrashUnderTrafficFailsNoCall(t *testing.T) {
	srv := smallBroker(t)
	h := startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers()})
	restarts := countRestarts(t, engineOf(h))
	const workers, rounds, crashes = 8, 12, 5
	var (
		wg        sync.WaitGroup
		completed = make(chan struct{}, workers*rounds)
		failed    atomic.Int64
	)
	for w := range workers {
		c := newClient(t, connect(t, srv), testPrefix)
		wg.Go(func() {
			// A session opened before the crashes and finished after them.
			long, err := c.open("echo", nil, 1024)
			if err != nil {
				t.Errorf("worker %d: open: %v", w, err)
				failed.Add(1)
				return
			}
			for r := range rounds {
				data := payload(3000 + 100*w + r)
				out, err := c.roundTrip("echo", nil, data)
				if err != nil || !bytes.Equal(out, data) {
					t.Errorf("worker %d round %d: %v", w, r, err)
					failed.Add(1)
				}
				if err := c.write(long.ID, uint64(r), []byte(fmt.Sprint(r%10))); err != nil {
					t.Errorf("worker %d: long session write %d: %v", w, r, err)
					failed.Add(1)
				}
				completed <- struct{}{}
			}
			if _, err := c.start(long.ID); err != nil {
				t.Errorf("worker %d: long session start: %v", w, err)
			}
			if got, err := c.readAll(long.ID); err != nil || len(got) != rounds {
				t.Errorf("worker %d: long session read %q, %v", w, got, err)
			}
			_ = c.close(long.ID)
		})
	}
	for i := range crashes {
		// Crash after every few finished rounds, so the traffic runs across each.
		for range workers * rounds / (crashes + 1) {
			<-completed
		}
		engineOf(h).Send(h.PID(), actors.Kill{Reason: fmt.Sprint("chaos ", i)})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	testwait.For(t, 10*time.Second, "every crash handled", func() bool { return restarts() == crashes })
}
