package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/examples/counter"
)

// An engine embedded in a program of its own: the embedded NATS server, the kernel
// services, a service of the program's own (package examples/counter) and a job, all
// behind the lease; the program calls its service through the SDK like any client.
func Example() {
	dir, err := os.MkdirTemp("", "abi-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := config.Default()
	cfg.NATS.URL = "" // the embedded broker
	cfg.NATS.Embedded.Listen = "127.0.0.1:0"
	cfg.NATS.Embedded.StoreDir = dir
	cfg.HTTP.Listen = ""

	store := counter.NewMemory()
	ticked := make(chan struct{})
	var once sync.Once
	job := engine.Job{Name: "tick", Schedule: engine.Every(10 * time.Millisecond), Run: func(ctx context.Context) error {
		_, err := store.Incr(ctx, "ticks", 1, 0)
		once.Do(func() { close(ticked) })
		return err
	}}
	e, err := engine.New(cfg, engine.WithService(counter.Service(store)), engine.WithJob(job))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Load(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Shutdown(ctx) //nolint:errcheck // the example ends here either way
	fmt.Println("state:", e.State())

	nc, err := nats.Connect(e.NATSURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	tr, err := client.NewTransport(nc)
	if err != nil {
		log.Fatal(err)
	}
	c := counter.NewClient(tr)
	v, err := c.Incr(ctx, "visits", 2)
	fmt.Println("visits:", v, err)
	_, err = c.Incr(ctx, "", 1)
	fmt.Println(err != nil, protocolCode(err))

	<-ticked
	fmt.Println("the job ran on the serving engine")
	// Output:
	// state: serving
	// visits: 2 <nil>
	// true INVALID_ARGUMENT
	// the job ran on the serving engine
}

// Two engines in one process hand over while a client keeps calling: the standby (an
// engine of the next rollout) takes the lease the moment the serving one releases it,
// the calls in flight are answered, and none fails. The counter lives in a JetStream
// bucket both engines share, so every increment acknowledged is counted once.
func Example_handover() {
	url, stop := startBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	start := func(rollout string) *engine.Engine {
		cfg := config.Default()
		cfg.NATS.URL = url
		cfg.NATS.Engine.RolloutID = rollout // engines of another rollout stand by
		cfg.HTTP.Listen = ""
		nc, err := nats.Connect(url)
		if err != nil {
			log.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			log.Fatal(err)
		}
		store, err := counter.OpenJetStream(ctx, js, "EXAMPLE_COUNTERS")
		if err != nil {
			log.Fatal(err)
		}
		e, err := engine.New(cfg, engine.WithService(counter.Service(store)))
		if err != nil {
			log.Fatal(err)
		}
		if err := e.Load(ctx); err != nil {
			log.Fatal(err)
		}
		go func() { <-e.Done(); nc.Close() }()
		return e
	}
	a := start("v1")
	b := start("v2")
	fmt.Println("a:", a.State(), "b:", b.State())

	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	tr, err := client.NewTransport(nc)
	if err != nil {
		log.Fatal(err)
	}
	c := counter.NewClient(tr)
	var ok, failed atomic.Int64
	byEngine := map[bool]int{} // answered before the handover ended, after
	quit := make(chan struct{})
	done := make(chan struct{})
	var handedOver atomic.Bool
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if _, err := c.Incr(ctx, "calls", 1); err != nil {
				failed.Add(1)
				continue
			}
			ok.Add(1)
			byEngine[handedOver.Load()]++
		}
	}()
	waitFor(func() bool { return ok.Load() >= 50 })
	if err := a.Shutdown(ctx); err != nil { // the handover
		log.Fatal(err)
	}
	handedOver.Store(true)
	n := ok.Load()
	waitFor(func() bool { return ok.Load() >= n+50 })
	close(quit)
	<-done

	total, err := c.Get(ctx, "calls")
	fmt.Println("b:", b.State())
	fmt.Println("failed calls:", failed.Load())
	fmt.Println("answered by each engine:", byEngine[false] > 0, byEngine[true] > 0)
	fmt.Println("every acknowledged increment counted once:", total == ok.Load(), err)
	if err := b.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a: serving b: standby
	// b: serving
	// failed calls: 0
	// answered by each engine: true true
	// every acknowledged increment counted once: true <nil>
}

// protocolCode is the code of an SDK error.
func protocolCode(err error) string {
	var ce *client.CallError
	if !errors.As(err, &ce) {
		return ""
	}
	return string(ce.Err.Code)
}

// waitFor polls cond every 5 ms until it holds (the example's one wait).
func waitFor(cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatal("waited 30s in vain")
		}
	}
}

// startBroker starts a nats-server with JetStream on a free port, as a shared broker
// of a real deployment would be.
func startBroker() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "abi-example-broker-")
	if err != nil {
		log.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server did not start")
	}
	return s.ClientURL(), func() {
		s.Shutdown()
		s.WaitForShutdown()
		os.RemoveAll(dir)
	}
}
