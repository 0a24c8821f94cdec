package fault

import (
	"context"
	"errors"
	"fmt"
	"github.com/abi-engine/engine/internal/testwait"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"go.uber.org/goleak"
)

const helperEnv = "CHAOS_FAULT_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helper()
		return
	}
	goleak.VerifyTestMain(m)
}

// helper is the child process of the process tests: it says it is ready, and exits 7
// on SIGTERM.
func helper() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Println("ready")
	<-term
	fmt.Println("terminated")
	os.Exit(7)
}

// echoServer accepts connections and echoes what it reads, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back, with a deadline.
func roundTrip(c net.Conn, msg string, within time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(within)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestProxyForwards(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if got, err := roundTrip(c, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
	if !strings.HasPrefix(p.URL(), "nats://127.0.0.1:") {
		t.Fatalf("URL %q", p.URL())
	}
}

func TestProxyCutHoldsBytesUntilRestore(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	// Nothing comes back while cut, and the connection stays open.
	_, err := roundTrip(c, "during", 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip while cut: %v, want a timeout", err)
	}
	// A connection opened while cut is accepted but carries nothing either.
	c2 := dial(t, p.Addr())
	if _, err := roundTrip(c2, "new", 100*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("new connection while cut: %v, want a timeout", err)
	}
	p.Restore()
	// The held bytes arrive, in order.
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("during"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "during" {
		t.Fatalf("after restore read %q, %v", buf, err)
	}
	if got, err := roundTrip(c, "after", 5*time.Second); err != nil || got != "after" {
		t.Fatalf("after restore = %q, %v", got, err)
	}
}

// TestProxyCutConnectionsCutsOneName: only the connections whose CONNECT names them so
// are cut; the others carry on, and Restore lets the held bytes through.
func TestProxyCutConnectionsCutsOneName(t *testing.T) {
	p := newProxy(t, echoServer(t))
	connect := func(name string) net.Conn {
		c := dial(t, p.Addr())
		hello := fmt.Sprintf("CONNECT {\"verbose\":false,\"name\":%q}\r\n", name)
		if got, err := roundTrip(c, hello, 5*time.Second); err != nil || got != hello {
			t.Fatalf("CONNECT of %s: %q, %v", name, got, err)
		}
		return c
	}
	lease, service := connect("abi-engine lease 0123"), connect("abi-engine service 0123")
	p.CutConnections("abi-engine lease ")
	var ne net.Error
	if _, err := roundTrip(lease, "held", 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the cut connection: %v, want a timeout", err)
	}
	if got, err := roundTrip(service, "flows", 5*time.Second); err != nil || got != "flows" {
		t.Fatalf("the other connection = %q, %v", got, err)
	}
	p.Restore()
	if err := lease.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("held"))
	if _, err := io.ReadFull(lease, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after restore read %q, %v", buf, err)
	}
}

func TestProxyResetClosesAndRefuses(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if _, err := roundTrip(c, "y", 5*time.Second); err == nil {
		t.Fatal("a reset connection still carries bytes")
	}
	// A new connection is refused: reset at once, or as soon as it carries anything.
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c2.Close()
		if _, err := roundTrip(c2, "z", 5*time.Second); err == nil {
			t.Fatal("a connection opened after Reset carries bytes")
		}
	}
	p.Restore()
	c3 := dial(t, p.Addr())
	if got, err := roundTrip(c3, "ok", 5*time.Second); err != nil || got != "ok" {
		t.Fatalf("after restore = %q, %v", got, err)
	}
}

func TestProxySlowDelays(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	const d = 100 * time.Millisecond
	p.Slow(d)
	start := time.Now()
	if _, err := roundTrip(c, "slow", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Both directions are delayed: at least 2d, a lower bound the machine cannot beat.
	if took := time.Since(start); took < 2*d {
		t.Fatalf("round trip took %s, want at least %s", took, 2*d)
	}
	p.Slow(0)
	if _, err := roundTrip(c, "fast", 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestProxyCloseEndsOpenLinks(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut() // writers waiting on the gate must end too
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still listens after Close")
	}
}

// startHelper runs this test binary as the helper child and waits for "ready".
func startHelper(t *testing.T) (*Process, *testproc.Output) {
	t.Helper()
	out := &testproc.Output{}
	p, err := StartProcess("helper", os.Args[0], []string{"-test.run=^$"}, []string{helperEnv + "=1"}, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	testwait.For(t, 10*time.Second, "helper ready", func() bool { return strings.Contains(out.String(), "ready") })
	return p, out
}

// procState is the state letter of /proc/<pid>/stat: T when stopped.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return fields[0]
}

func TestProcessTerminate(t *testing.T) {
	p, out := startHelper(t)
	if p.Exited() || p.PID() <= 0 {
		t.Fatal("helper not running")
	}
	if err := p.Terminate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil || code != 7 {
		t.Fatalf("exit %d, %v; output %q", code, err, out.String())
	}
	if p.Signaled() != 0 || p.ExitedAt().IsZero() || !strings.Contains(out.String(), "terminated") {
		t.Fatalf("signaled %v exited at %v output %q", p.Signaled(), p.ExitedAt(), out.String())
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill after exit: %v", err)
	}
}

func TestProcessKill(t *testing.T) {
	p, _ := startHelper(t)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.ExitCode() != -1 || p.Signaled() != syscall.SIGKILL {
		t.Fatalf("exit %d signal %v", p.ExitCode(), p.Signaled())
	}
}

func TestProcessPauseResumeAndStop(t *testing.T) {
	p, out := startHelper(t)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the helper stopped", func() bool { return procState(t, p.PID()) == "T" })
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the helper running again", func() bool { return procState(t, p.PID()) != "T" })
	// Stop of a paused process resumes it so it can act on SIGTERM.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the helper stopped", func() bool { return procState(t, p.PID()) == "T" })
	p.Stop(10 * time.Second)
	if p.ExitCode() != 7 {
		t.Fatalf("exit %d, output %q", p.ExitCode(), out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait on an exited process: %v", err)
	}
}

func TestStartProcessMissingBinary(t *testing.T) {
	if _, err := StartProcess("nothing", "/nonexistent/abi-engine", nil, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/abi-engine") {
		t.Fatalf("err = %v", err)
	}
}

func TestPutLease(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := PutLease(ctx, nc, 1, ForeignValue)
	if err != nil || rev == 0 {
		t.Fatalf("PutLease = %d, %v", rev, err)
	}
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != rev || r.Holder.Known() {
		t.Fatalf("lease after PutLease: %v (revision %d, want %d and an unknown holder)", r, r.Revision, rev)
	}
}
