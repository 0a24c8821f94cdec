package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// This file is the program of docs/embedding.md: every Go block of the guide is a
// piece of it, word for word (TestEmbeddingGuideIsThisCode), and TestEmbeddingGuideRuns
// runs it against a nats-server, so the guide cannot drift from code that compiles and
// runs.

// The guide's service: counters kept in this process's memory.

type incrRequest struct {
	Key string `json:"key"`
	By  int64  `json:"by"`
}

type incrReply struct {
	Value int64 `json:"value"`
}

var errNoKey = errors.New("the key is empty")

type counters struct {
	mu     sync.Mutex
	values map[string]int64
}

func (c *counters) incr(ctx context.Context, req *incrRequest) (incrReply, error) {
	if req.Key == "" {
		return incrReply{}, errNoKey
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[req.Key] += req.By
	return incrReply{Value: c.values[req.Key]}, nil
}

func counterService(c *counters) engine.Service {
	return engine.Service{
		Name:       "counter", // abi.svc.counter.v1.<operation>
		Operations: map[string]primaries.Operation{"incr": primaries.Handle(c.incr)},
		Data:       engine.LocalData("memory of this process"), // or engine.SharedData()
		Errors:     engine.ErrorCodes{{Target: errNoKey, Code: protocol.InvalidArgument}},
	}
}

// The guide's lifecycle: load the configuration, build, load, and hand over at the
// end; stop says when (serveUntil, below, in a program of its own).

func runEngine(ctx context.Context, log *zap.Logger, natsURL string, stop func(*engine.Engine) error) error {
	cfg, err := config.Load("", os.Getenv) // abi-engine.yaml if the working directory has one, else the defaults
	if err != nil {
		return err // names the key, the value and the rule
	}
	cfg.NATS.URL = natsURL // "" starts the embedded broker
	cfg.HTTP.Listen = ""   // the program serves no /healthz of the engine's own
	c := &counters{values: map[string]int64{}}
	e, err := engine.New(cfg,
		engine.WithService(counterService(c)),
		engine.WithJob(engine.Job{Name: "compact", Schedule: engine.Every(time.Minute), Run: func(context.Context) error { return nil }}),
		engine.WithLogger(log))
	if err != nil {
		return err // a bad configuration or option, named; nothing touched
	}
	if err := e.Load(ctx); err != nil {
		return err // *lease.AlreadyServingError when another engine serves
	}
	return stop(e)
}

// The guide's shutdown in a larger program: the first signal hands over, a second one
// stops at once; an engine that ends on its own (a lost lease) ends the wait too.

func serveUntil(e *engine.Engine, sigs <-chan os.Signal) error {
	ctx, stopNow := context.WithCancel(context.Background())
	defer stopNow()
	first, over, watched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // watches the signals until serveUntil returns
		defer close(watched)
		for n := 1; ; n++ {
			select {
			case <-sigs:
			case <-over:
				return
			}
			if n == 1 {
				close(first) // the first signal: hand over
				continue
			}
			stopNow() // a second one: stop at once
			return
		}
	}()
	defer func() { close(over); <-watched }()
	select {
	case <-first:
		return e.Shutdown(ctx) // hand over; ctx ends it early on the second signal
	case <-e.Done():
		return e.Err() // ended on its own: the program decides what next
	}
}

// guideMain is the program's main, with signals; the test stands in for them.
func guideMain() error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	return runEngine(context.Background(), zap.NewExample(), "", func(e *engine.Engine) error {
		return serveUntil(e, sigs)
	})
}

var _ = guideMain // compiled with the guide; run by a program, not by the test

// TestEmbeddingGuideRuns runs the guide's program against a nats-server from a working
// directory without abi-engine.yaml (config.Load("") gives the defaults): the engine
// serves the guide's service, a call through the SDK is answered, an error maps to its
// code, and a signal hands over.
func TestEmbeddingGuideRuns(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 2)
	served := make(chan error, 1)
	go func() {
		served <- runEngine(ctx, zap.NewNop(), srv.URL(), func(e *engine.Engine) error {
			reply, err := tr.Call(ctx, "counter", "incr", []byte(`{"key":"visits","by":2}`))
			if err != nil {
				return err
			}
			var r incrReply
			if err := json.Unmarshal(reply.Data, &r); err != nil || r.Value != 2 {
				t.Errorf("incr: %s %v, want value 2", reply.Data, err)
			}
			_, err = tr.Call(ctx, "counter", "incr", []byte(`{"key":"","context":{"timeout_ms":1000}}`))
			var ce *client.CallError
			if !errors.As(err, &ce) || ce.Err.Code != protocol.InvalidArgument {
				t.Errorf("incr of an empty key: %v, want INVALID_ARGUMENT", err)
			}
			sigs <- syscall.SIGTERM
			return serveUntil(e, sigs)
		})
	}()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("the guide's program: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the guide's program did not end")
	}
}

// TestEmbeddingGuideIsThisCode: every Go block of docs/embedding.md is in this file,
// line for line (leading white space aside), so what the guide shows compiles and runs.
func TestEmbeddingGuideIsThisCode(t *testing.T) {
	guide, err := os.ReadFile("docs/embedding.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("guide_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := trimmedLines(string(self))
	blocks := goBlocks(string(guide))
	if len(blocks) < 3 {
		t.Fatalf("docs/embedding.md has %d Go blocks, want the lifecycle, the service and the shutdown", len(blocks))
	}
	for _, b := range blocks {
		if !containsRun(code, trimmedLines(b)) {
			t.Errorf("a Go block of docs/embedding.md is not in guide_test.go word for word:\n%s", b)
		}
	}
}

// goBlocks are the ```go blocks of a Markdown text.
func goBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// trimmedLines are the lines of s without their leading and trailing white space,
// blank lines left out.
func trimmedLines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// containsRun reports whether want appears in lines as consecutive lines.
func containsRun(lines, want []string) bool {
	for i := 0; i+len(want) <= len(lines); i++ {
		match := true
		for j, w := range want {
			if lines[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
