package primaries

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// OnCall hears of every answered call with its operation and code, whether calls run
// on workers or, for an inline service, on micro's callback; and an inline service
// keeps every guarantee of the call path (the lease check before running, the
// instance header, the error envelope, the call count) while starting no worker.
func TestOnCallSeesEveryAnswer(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { testOnCall(t, inline) })
	}
}

func testOnCall(t *testing.T, inline bool) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	type seen struct {
		svc, op string
		code    protocol.Code
	}
	calls := make(chan seen, 10)
	var valid atomic.Bool
	valid.Store(true)
	svc := Service{Name: "test_svc", Inline: inline, Operations: map[string]Operation{
		"echo": Handle(func(_ context.Context, r *workReq) (workRep, error) { return workRep{ID: r.ID}, nil }),
		"notfound": Handle(func(_ context.Context, r *workReq) (workRep, error) {
			return workRep{}, protocol.Errorf(protocol.NotFound, "no %q", r.ID)
		}),
	}}
	asked := map[string]bool{}
	p, err := New(svc, Config{Conn: nc, InstanceID: "engine-a", MaxConcurrent: 2, LeaseValid: valid.Load,
		OnCall: func(service, op string) CallObserver {
			asked[service+"."+op] = true
			return func(code protocol.Code, d time.Duration) {
				if d < 0 {
					t.Errorf("negative duration %s", d)
				}
				calls <- seen{service, op, code}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !asked["test_svc.echo"] || !asked["test_svc.notfound"] || len(asked) != 2 {
		t.Errorf("OnCall was asked for %v, want each operation once, when the primary is made", asked)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	serve(t, p)
	results := []result{call(client, "echo", "1", waitTimeout), call(client, "notfound", "2", waitTimeout)}
	valid.Store(false)
	results = append(results, call(client, "echo", "3", waitTimeout))
	for _, want := range []seen{{"test_svc", "echo", ""}, {"test_svc", "notfound", protocol.NotFound}, {"test_svc", "echo", protocol.Unavailable}} {
		if got := recv(t, calls, "an OnCall"); got != want {
			t.Errorf("OnCall(%+v), want %+v", got, want)
		}
	}
	if r := results[0]; r.err != nil || r.werr != nil || r.rep.ID != "1" || r.instance() != "engine-a" {
		t.Errorf("echo: %+v, want ID 1 from engine-a", r)
	}
	if r := results[1]; r.werr == nil || r.werr.Code != protocol.NotFound || r.instance() != "engine-a" {
		t.Errorf("notfound: %+v, want the NOT_FOUND envelope from engine-a", r)
	}
	if r := results[2]; r.werr == nil || r.werr.Code != protocol.Unavailable || !r.werr.Retryable {
		t.Errorf("without a valid lease: %+v, want UNAVAILABLE retryable", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := p.SessionsFinished(ctx); err != nil { // the count falls once each answer is out
		t.Errorf("calls still counted after every answer: %v (%d in flight)", err, p.InFlight())
	}
	var workers int64
	for _, rv := range p.view.Load().runs {
		workers += rv.run.nworkers.Load()
	}
	if inline && workers != 0 {
		t.Errorf("an inline service started %d workers, want none", workers)
	}
	if !inline && workers == 0 {
		t.Error("the calls of a service that is not inline ran on no worker")
	}
}
