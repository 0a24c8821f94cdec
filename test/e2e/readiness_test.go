package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// agreement polls a process's /status and /readyz until stopped and records every
// moment they disagree. A sample counts only when /status reads the same state before
// and after /readyz, so a change between the two requests is not taken for a lie.
type agreement struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	states []string // the distinct states seen, in order
	lies   []string
	checks int
}

func watchAgreement(addr string) *agreement {
	a := &agreement{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	state := func() (string, bool) {
		resp, err := client.Get("http://" + addr + "/status")
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		var st struct {
			State string `json:"state"`
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return "", false
		}
		return st.State, true
	}
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			default:
			}
			before, ok := state()
			if !ok {
				time.Sleep(time.Millisecond) // not listening yet, or gone
				continue
			}
			resp, err := client.Get("http://" + addr + "/readyz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			after, ok := state()
			if !ok || after != before {
				continue
			}
			ready := resp.StatusCode == http.StatusOK
			want := before == "serving" || before == "standby" || before == "client"
			a.mu.Lock()
			a.checks++
			if len(a.states) == 0 || a.states[len(a.states)-1] != before {
				a.states = append(a.states, before)
			}
			if ready != want {
				a.lies = append(a.lies, fmt.Sprintf("state %s but /readyz %d", before, resp.StatusCode))
			}
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *agreement) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// TestStatusAndReadinessAgreeThroughATakeover is issue 10 item 2: from before the
// start through a rolling takeover, /status says serving exactly when /readyz says
// the engine is ready to serve; a claimed lease is not "serving" while the backends
// still open and the subscriptions are unconfirmed.
func TestStatusAndReadinessAgreeThroughATakeover(t *testing.T) {
	srv := natstest.Start(t)
	portA, portB := testproc.FreePort(t), testproc.FreePort(t)
	watchA := watchAgreement(fmt.Sprintf("127.0.0.1:%d", portA))
	defer watchA.halt()
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 1, HTTPPort: portA})
	a.waitState("serving", 20*time.Second)
	watchB := watchAgreement(fmt.Sprintf("127.0.0.1:%d", portB))
	defer watchB.halt()
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 1, HTTPPort: portB})
	b.waitState("standby", 20*time.Second)
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after SIGTERM, want 0", code)
	}
	b.waitState("serving", 10*time.Second)
	watchA.halt()
	watchB.halt()
	for name, w := range map[string]*agreement{"A": watchA, "B": watchB} {
		t.Logf("%s: %d consistent samples, states %v", name, w.checks, w.states)
		for i, lie := range w.lies {
			if i == 5 {
				t.Errorf("%s: ... %d disagreements in all", name, len(w.lies))
				break
			}
			t.Errorf("%s: %s", name, lie)
		}
	}
	if len(watchB.states) == 0 || watchB.states[len(watchB.states)-1] != "serving" {
		t.Errorf("B's states %v do not end serving", watchB.states)
	}
}
