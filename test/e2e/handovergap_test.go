package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

// deploysEnv sets how many rolling deploys TestRollingDeploysLeaveNoGap runs (3 unless
// set); the handover gap figures of docs/performance.md come from 20.
const deploysEnv = "ABI_E2E_HANDOVER_DEPLOYS"

// TestRollingDeploysLeaveNoGap is issue 13's zero-gap handover in real processes: a
// chain of rolling deploys, each with a standby ready, under eight set-then-get loops.
// The old engine keeps its subscriptions until the new holder's answer at the broker,
// so no call finds nobody subscribed: the SDK sees no "no responders" at all, and every
// call is answered, every read with what was written. It logs the longest time
// without a successful reply in each deploy (a figure, not asserted).
func TestRollingDeploysLeaveNoGap(t *testing.T) {
	deploys := 3
	if v := os.Getenv(deploysEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of deploys", deploysEnv, v)
		}
		deploys = n
	}
	srv := natstest.Start(t)
	engine := func(i int) *proc {
		return start(t, fmt.Sprintf("engine-%d", i), engineConfig{
			NATSURL: srv.URL(), Rollout: fmt.Sprintf("r%d", i), Drain: 5, HTTPPort: testproc.FreePort(t),
		})
	}
	cur := engine(0)
	cur.waitState("serving", 20*time.Second)
	ld := startGapLoad(t, srv.URL(), 8)
	ld.waitAnswers(t, cur.instanceID(), 200, 20*time.Second)

	var gaps, beforeBump, atBump []time.Duration
	for i := 1; i <= deploys; i++ {
		next := engine(i)
		next.waitState("standby", 20*time.Second)
		id := next.instanceID()
		sigterm := time.Now()
		cur.signal(syscall.SIGTERM)
		if code := cur.exitCode(30 * time.Second); code != 0 {
			t.Fatalf("deploy %d: %s exited %d after SIGTERM, want 0", i, cur.name, code)
		}
		ld.waitAnswers(t, id, 200, 20*time.Second)
		end := time.Now()
		gaps = append(gaps, ld.longestGap(sigterm, end))
		// The successor's deferred epoch bump (after the old engine's drain) is a pause
		// of its own: its backends adopt the next epoch while its calls run.
		if bump, ok := next.logTime(`"event":"epoch_bumped"`, `"deferred":true`); ok {
			beforeBump = append(beforeBump, ld.longestGap(sigterm, bump))
			atBump = append(atBump, ld.longestGap(bump, end))
		}
		if st := ld.tr.Counters().Snapshot(); st.NoResponders > 0 {
			t.Errorf("deploy %d: the SDK has seen %d \"no responders\" so far (%d retries)", i, st.NoResponders, st.Retries)
		}
		cur = next
	}
	ld.halt()

	st := ld.tr.Counters().Snapshot()
	t.Logf("%d deploys, %d calls answered; longest gap without a successful reply per deploy: %s",
		deploys, ld.answered(), gapFigures(gaps))
	if len(beforeBump) > 0 {
		t.Logf("of which, before the successor's epoch bump: %s", gapFigures(beforeBump))
		t.Logf("and from the bump on: %s", gapFigures(atBump))
	}
	if st.NoResponders != 0 {
		t.Fatalf("the SDK saw %d \"no responders\" over %d deploys, want none", st.NoResponders, deploys)
	}
	if len(ld.fails) > 0 {
		t.Fatalf("%d calls were not answered, first: %s", len(ld.fails), ld.fails[0])
	}
	if len(ld.bad) > 0 {
		t.Fatalf("%d reads did not return what was written, first: %s", len(ld.bad), ld.bad[0])
	}
}

// gapFigures describes the gaps: median, p99 (nearest rank), max, and each one.
func gapFigures(gaps []time.Duration) string {
	s := slices.Clone(gaps)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	each := make([]string, len(gaps))
	for i, g := range gaps {
		each[i] = ms(g)
	}
	return fmt.Sprintf("median %s, p99 %s, max %s; in order %v", ms(rank(0.5)), ms(rank(0.99)), ms(s[len(s)-1]), each)
}

// gapLoad runs set-then-get loops through one SDK transport (whose counters the test
// reads) and keeps the longest time without a successful reply since the last reset.
type gapLoad struct {
	tr   *client.Transport
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	fails  []string
	bad    []string
	counts map[string]int // successful replies by instance
	oks    []time.Time    // when each successful reply came, in order
}

func startGapLoad(t testing.TB, url string, workers int) *gapLoad {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ld := &gapLoad{tr: tr, stop: cancel, counts: map[string]int{}}
	for w := range workers {
		ld.wg.Go(func() { ld.loop(ctx, w) })
	}
	t.Cleanup(ld.halt)
	return ld
}

func (ld *gapLoad) loop(ctx context.Context, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("gap-w%d-%d", w, i)
		value := []byte(fmt.Sprintf("value %d of worker %d", i, w))
		inst, err := call(ctx, ld.tr, protocol.OpSet, protocol.KVSetRequest{Key: key, Value: value}, nil)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			ld.fail("worker %d: set %s: %v", w, key, err)
			continue
		}
		ld.ok(inst)
		var got protocol.KVGetReply
		inst, err = call(ctx, ld.tr, protocol.OpGet, protocol.KVKeyRequest{Key: key}, &got)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			ld.fail("worker %d: get %s: %v", w, key, err)
			continue
		}
		ld.ok(inst)
		if !got.Found || !bytes.Equal(got.Value, value) {
			ld.mu.Lock()
			ld.bad = append(ld.bad, fmt.Sprintf("get %s = %v %q, want %q", key, got.Found, got.Value, value))
			ld.mu.Unlock()
		}
	}
}

func (ld *gapLoad) fail(format string, args ...any) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.fails = append(ld.fails, fmt.Sprintf(format, args...))
}

func (ld *gapLoad) ok(inst string) {
	now := time.Now()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.counts[inst]++
	ld.oks = append(ld.oks, now)
}

// longestGap is the longest time without a successful reply that ends in [from, to]:
// between two replies, or from the last reply before from.
func (ld *gapLoad) longestGap(from, to time.Time) time.Duration {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	i, _ := slices.BinarySearchFunc(ld.oks, from, func(ok, t time.Time) int { return ok.Compare(t) })
	var longest time.Duration
	for i = max(i, 1); i < len(ld.oks) && !ld.oks[i].After(to); i++ {
		longest = max(longest, ld.oks[i].Sub(ld.oks[i-1]))
	}
	return longest
}

func (ld *gapLoad) answered() int {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return len(ld.oks)
}

// waitAnswers waits until inst has answered at least n calls (the loops' own events;
// the engine is another process).
func (ld *gapLoad) waitAnswers(t testing.TB, inst string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ld.mu.Lock()
		got := ld.counts[inst]
		ld.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s answered %d calls within %s, want %d", inst, got, within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ld *gapLoad) halt() {
	ld.stop()
	ld.wg.Wait()
}

// logTime is the time of the first line of p's log that contains every one of parts.
func (p *proc) logTime(parts ...string) (time.Time, bool) {
	for _, line := range strings.Split(p.out.String(), "\n") {
		if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(line, s) }) {
			var l struct {
				TS string `json:"ts"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			if ts, err := time.Parse(time.RFC3339Nano, l.TS); err == nil {
				return ts, true
			}
		}
	}
	return time.Time{}, false
}
