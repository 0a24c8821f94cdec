package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestStepDownRaceLostIsNotServing: two step-downs of one engine at once. One hands
// over; the other lost the race and is answered NOT_SERVING, saying it changed nothing,
// not INTERNAL (whose advice, evict --force, would evict the new holder).
func TestStepDownRaceLostIsNotServing(t *testing.T) {
	srv := natstest.Start(t)
	holder := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"))
	load(t, holder)
	standby := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"))
	load(t, standby)

	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = control.RequestStepDown(ctx, nc, holder.InstanceID(), control.StepDownRequest{})
		}()
	}
	wg.Wait()
	var ok, lost int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, control.ErrNotServing):
			lost++
			if !strings.Contains(err.Error(), "changed nothing") {
				t.Errorf("the lost race's answer does not say it changed nothing: %v", err)
			}
		default:
			t.Errorf("a step-down answered %v, want success or NOT_SERVING", err)
		}
	}
	if ok != 1 || lost != 1 {
		t.Fatalf("%d handed over, %d NOT_SERVING (%v); want one of each", ok, lost, errs)
	}
	select {
	case <-holder.Done():
	case <-ctx.Done():
		t.Fatal("the holder did not hand over")
	}
}
