package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

// zombieCallers is how many callers each have one call queued at the paused holder.
const zombieCallers = 1000

// TestAResumedZombieAnswersWhatItFindsQueued is issue 9 item 6: the holder is SIGSTOPped
// while many callers each send a call, which all queue at it (it is the only engine
// subscribed). The standby takes over; then the holder is SIGCONTed. Everything it finds
// queued ran nothing (the per-call lease check refuses it), so it must answer each call
// UNAVAILABLE, retryable, before it exits 1 as lost: the caller resends at once and the
// new holder answers. Before, the old engine closed its connection with calls still
// queued and those callers waited out their timeout.
func TestAResumedZombieAnswersWhatItFindsQueued(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idB := b.instanceID()

	// The retry window outlasts the pause, so a call refused at the resume is resent
	// however long it sat queued; the timeout is what a dropped call waits out.
	const timeout = 15 * time.Second
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()), client.WithRetryPolicy(client.RetryPolicy{
		Window: timeout, FirstDelay: 50 * time.Millisecond, MaxDelay: 500 * time.Millisecond, Margin: 500 * time.Millisecond,
	}))
	if err != nil {
		t.Fatal(err)
	}

	a.signal(syscall.SIGSTOP)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
	type result struct {
		instance string
		err      error
	}
	results := make(chan result, zombieCallers)
	var sent sync.WaitGroup
	sent.Add(zombieCallers)
	for i := range zombieCallers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			body, _ := json.Marshal(protocol.KVSetRequest{Key: fmt.Sprintf("zombie-%d", i), Value: []byte("v")})
			sent.Done()
			r, err := tr.Request(ctx, protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet), body, nil)
			if err != nil {
				results <- result{err: err}
				return
			}
			results <- result{instance: r.Instance}
		}()
	}
	sent.Wait()
	// The takeover takes a lease of silence, far longer than the callers take to send.
	b.waitState("serving", 20*time.Second)
	a.signal(syscall.SIGCONT)

	var timedOut, failed []error
	ok := 0
	for range zombieCallers {
		r := <-results
		switch {
		case errors.Is(r.err, protocol.ErrDeadlineExceeded):
			timedOut = append(timedOut, r.err)
		case r.err != nil:
			failed = append(failed, r.err)
		case r.instance != idB:
			failed = append(failed, fmt.Errorf("answered by %s, want the new holder %s", r.instance, idB))
		default:
			ok++
		}
	}
	if code := a.exitCode(30 * time.Second); code != 1 {
		t.Errorf("the resumed holder exited %d, want 1 (lost)", code)
	}
	a.waitLog("another engine took the engine lease", time.Second)
	st := tr.Counters().Snapshot()
	t.Logf("%d calls queued at the paused holder: %d answered by the new holder, %d timed out, %d failed otherwise; %d resends",
		zombieCallers, ok, len(timedOut), len(failed), st.Retries)
	if len(timedOut) > 0 {
		t.Errorf("%d of %d calls timed out: the resumed holder dropped what it had queued; first: %v", len(timedOut), zombieCallers, timedOut[0])
	}
	if len(failed) > 0 {
		t.Errorf("%d calls failed, first: %v", len(failed), failed[0])
	}
}
