package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

// TestConcurrentDownloadsStayWithinTheMemoryBound is issue 26's bound under one client:
// 16 connections each start 3 transfer gets of one 40 MiB object at once, against an
// engine with the default limits in a memory cgroup of 512 MiB (the manifest's pod
// limit). Each get that is refused RESOURCE_EXHAUSTED (retryable) tries again, so all 48
// end with the object. The engine is not killed, its peak RSS stays within the bound
// docs/operations.md states for the defaults (448 MiB), and the broker never cuts the
// engine's connection as a slow consumer. Before, each start read the whole object
// before its session reserved the bytes, so 48 starts held 48 objects (798 MB RSS
// measured), and 48 JetStream reads at once flooded the service connection until the
// broker cut it.
func TestConcurrentDownloadsStayWithinTheMemoryBound(t *testing.T) {
	downloadsWithinBound(t, (*client.ObjectStorage).DownloadObject)
}

// TestConcurrentGetObjectsStayWithinTheMemoryBound is the same bound for get_object:
// 16 connections × 3 concurrent get_object calls of the 40 MiB object, whose replies
// are too large for one message and are parked. A get_object reserves its reply (the
// object is read into the reply's buffer) before it reads; every call is served by
// get_object itself, none by the SDK's fallback to a transfer. Before, each call read
// the object and only then parked its reply, unreserved: the engine peaked above the
// bound, and most calls failed "could not be parked".
func TestConcurrentGetObjectsStayWithinTheMemoryBound(t *testing.T) {
	p := downloadsWithinBound(t, (*client.ObjectStorage).GetObject)
	const served = `abi_engine_requests_total{code="OK",operation="get_object",service="object_storage"}`
	if n := p.metric(t, served); n < 48 {
		t.Errorf("%s is %v; want every one of the 48 calls served by get_object", served, n)
	}
	const tooLarge = `abi_engine_requests_total{code="PAYLOAD_TOO_LARGE",operation="get_object",service="object_storage"}`
	if n := p.metric(t, tooLarge); n > 0 {
		t.Errorf("%s is %v: calls were read by transfer instead", tooLarge, n)
	}
}

// downloadsWithinBound reads the 40 MiB object with get, 16 connections × 3 at once,
// and checks the engine's peak RSS against the bound. It returns the engine, still
// running.
func downloadsWithinBound(t *testing.T, get func(*client.ObjectStorage, context.Context, string, string) ([]byte, error)) *proc {
	const (
		conns     = 16
		perConn   = 3
		objectMiB = 40
		boundMiB  = 448 // docs/operations.md: limits.memory_mib 256 + 128 MiB headroom + 64 MiB idle
		cgroupMiB = 512 // deploy/: the pod's memory limit
	)
	if raceDetector {
		// The engine process is built without the race detector either way; with it,
		// this test's own decoding of 1.9 GB of chunks takes over four minutes. CI runs
		// it in its pass with the fail points, which has no race detector.
		t.Skip("without the race detector only: the downloads' decoding in this process is too slow with it")
	}
	add := memoryCgroup(t, cgroupMiB<<20)
	srv := natstest.Start(t)
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t), Lease: 10})
	add(p.cmd.Process.Pid)
	p.waitState("serving", 20*time.Second)
	pid := p.cmd.Process.Pid

	object := make([]byte, objectMiB<<20)
	for i := range object {
		object[i] = byte(i * 31 >> 7)
	}
	up, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewObjectStorage(up).PutObject(ctxFor(t, time.Minute), "e2e", "big", object); err != nil {
		t.Fatalf("put the %d MiB object: %v", objectMiB, err)
	}
	slowBefore := srv.Raw().NumSlowConsumers()

	var (
		mu       sync.Mutex
		refusals = map[protocol.Code]int{}
		failures []string
		wg       sync.WaitGroup
	)
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	go func() { // a dead engine answers nothing: stop retrying at once
		select {
		case <-p.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	for range conns {
		tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
		if err != nil {
			t.Fatal(err)
		}
		objects := client.NewObjectStorage(tr)
		for range perConn {
			wg.Go(func() {
				for attempt := 0; ; attempt++ {
					got, err := get(objects, ctx, "e2e", "big")
					var ce *client.CallError
					switch {
					case err == nil && bytes.Equal(got, object):
						return
					case err == nil:
						mu.Lock()
						failures = append(failures, fmt.Sprintf("a download returned %d bytes that are not the object", len(got)))
						mu.Unlock()
						return
					case errors.As(err, &ce) && ce.Err.Retryable && ctx.Err() == nil:
						mu.Lock()
						refusals[ce.Err.Code]++
						mu.Unlock()
						// The caller's backoff, as a retrying SDK would pause: the engine
						// gives the bytes back as other downloads end.
						time.Sleep(time.Duration(20+attempt%8*10) * time.Millisecond)
					default:
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	select {
	case <-p.exited:
		t.Fatalf("the engine died during the downloads (killed by its memory cgroup of %d MiB?) after %s",
			cgroupMiB, time.Since(began).Round(time.Millisecond))
	default:
	}
	peak := procKiB(t, pid, "VmHWM")
	slow := srv.Raw().NumSlowConsumers() - slowBefore
	t.Logf("%d downloads of %d MiB from %d connections in %s; retryable refusals %v; engine peak RSS %d MiB (bound %d MiB); slow consumers at the broker %d",
		conns*perConn, objectMiB, conns, time.Since(began).Round(time.Millisecond), refusals, peak>>10, boundMiB, slow)
	for _, f := range failures {
		t.Error(f)
	}
	if peak > boundMiB<<10 {
		t.Errorf("the engine's peak RSS was %d MiB, above the documented bound of %d MiB", peak>>10, boundMiB)
	}
	if slow != 0 {
		t.Errorf("the broker counted %d slow consumers during the downloads", slow)
	}
	for _, s := range []string{"nats disconnected", "slow consumer", "slow_consumer"} {
		if strings.Contains(p.out.String(), s) {
			t.Errorf("the engine logged %q during the downloads", s)
		}
	}
	return p
}
