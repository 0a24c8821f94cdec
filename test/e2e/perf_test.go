package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// These benchmarks measure what docs/performance.md reports; they assert nothing about
// speed. Run them with: go test -run x -bench . -benchtime 1x ./test/e2e/

// embeddedEngine starts a serving engine that hosts the embedded broker.
func embeddedEngine(b *testing.B, url string) *proc {
	dir := b.TempDir()
	port := testproc.FreePort(b)
	nats := fmt.Sprintf("  url: %q\n", url)
	if url == "" {
		nats += fmt.Sprintf("  embedded: {listen: \"127.0.0.1:0\", store_dir: %q}\n", filepath.Join(dir, "nats"))
	}
	text := fmt.Sprintf("nats:\n%s  engine: {lease_seconds: 5}\nservices:\n  keyvalue: {adapter: memory}\n  object_storage: {adapter: memory}\nhttp: {listen: \"127.0.0.1:%d\"}\n", nats, port)
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return startArgs(b, "engine", dir, port, nil, "run", "--config", path)
}

// BenchmarkStartToServing is the time from starting the process to /readyz answering
// 200 on an engine that hosts the embedded broker (nothing else installed).
func BenchmarkStartToServing(b *testing.B) {
	var samples []time.Duration
	for range b.N {
		for range 10 {
			began := time.Now()
			p := embeddedEngine(b, "")
			p.waitHTTP("/readyz", 200, 20*time.Second)
			samples = append(samples, time.Since(began))
			p.signal(syscall.SIGTERM)
			p.exitCode(20 * time.Second)
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "max-ms")
	b.Logf("start to serving: %v", samples)
}

// BenchmarkHandoverGap runs 20 rolling deploys under eight set-then-get loops and
// reports the longest time without a successful reply in each.
func BenchmarkHandoverGap(b *testing.B) {
	srv := natstest.Start(b)
	var gaps []time.Duration
	for range b.N {
		cfg := func(v int) engineConfig {
			return engineConfig{NATSURL: srv.URL(), Rollout: fmt.Sprintf("v%d", v), Drain: 5, HTTPPort: testproc.FreePort(b)}
		}
		old := start(b, "v0", cfg(0))
		old.waitState("serving", 20*time.Second)
		tf := startTraffic(b, srv.URL(), 8)
		for i := 1; i <= 20; i++ {
			next := start(b, fmt.Sprintf("v%d", i), cfg(i))
			next.waitState("standby", 20*time.Second)
			tf.waitAnswers(b, old.instanceID(), 50, 10*time.Second)
			tf.mu.Lock()
			tf.maxGap, tf.lastOK = 0, time.Now()
			tf.mu.Unlock()
			old.signal(syscall.SIGTERM)
			old.exitCode(30 * time.Second)
			next.waitState("serving", 10*time.Second)
			tf.waitAnswers(b, next.instanceID(), 50, 10*time.Second)
			tf.mu.Lock()
			gaps = append(gaps, tf.maxGap)
			tf.mu.Unlock()
			old = next
		}
		tf.halt()
		if len(tf.fails) > 0 {
			b.Fatalf("%d failed calls, first %s", len(tf.fails), tf.fails[0])
		}
	}
	slices.Sort(gaps)
	p99 := gaps[(len(gaps)*99+99)/100-1]
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "gap-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "gap-p99-ms")
	b.Logf("handover gaps: %v", gaps)
}

// BenchmarkIdleRSS is the resident memory of an idle serving engine, against an
// external broker and hosting the embedded one.
func BenchmarkIdleRSS(b *testing.B) {
	srv := natstest.Start(b)
	for range b.N {
		for _, url := range []string{srv.URL(), ""} {
			p := embeddedEngine(b, url)
			p.waitHTTP("/readyz", 200, 20*time.Second)
			time.Sleep(2 * time.Second) // idle means after start-up's garbage is gone
			name := "external-broker-MiB"
			if url == "" {
				name = "embedded-broker-MiB"
			}
			b.ReportMetric(float64(rssKiB(b, p.cmd.Process.Pid))/1024, name)
			p.signal(syscall.SIGTERM)
			p.exitCode(20 * time.Second)
		}
	}
}

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
