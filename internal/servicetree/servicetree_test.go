package servicetree

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The Stopper stops its parts last built first, once, passing on what each learnt; a
// part pushed after Close is stopped at once.
func TestStopperStopsLastBuiltFirstOnce(t *testing.T) {
	type learnt struct{ order []string }
	s := NewStopper[learnt](zap.NewNop(), time.Second)
	for _, name := range []string{"panics", "ownership", "members", "root"} {
		s.Push(name, func(_ context.Context, c *learnt) { c.order = append(c.order, name) })
	}
	var c learnt
	s.Close(context.Background(), &c)
	s.Close(context.Background(), &c)
	if want := []string{"root", "members", "ownership", "panics"}; !slices.Equal(c.order, want) {
		t.Fatalf("stopped %v, want %v, each once", c.order, want)
	}
	late := false
	s.Push("late", func(context.Context, *learnt) { late = true })
	if !late {
		t.Fatal("a part pushed after Close was not stopped at once")
	}
}

// Stop removes the services in the order given, each waited for; a service added after
// it is stopped at once.
func TestTreeStopsInTheOrderGiven(t *testing.T) {
	tr := New(nil, zap.NewNop(), time.Second)
	tr.Start()
	var mu sync.Mutex
	var order []string
	for _, name := range []string{"broker", "lease", "actors", "service"} {
		tr.Add(name, OnStop{Name: name, Stop: func() {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
		}})
	}
	tr.Stop([]string{"actors", "service", "lease", "broker"})
	if want := []string{"actors", "service", "lease", "broker"}; !slices.Equal(order, want) {
		t.Fatalf("stopped %v, want %v", order, want)
	}
	late := make(chan struct{})
	tr.Add("late", OnStop{Name: "late", Stop: func() { close(late) }})
	select {
	case <-late:
	default:
		t.Fatal("a service added after Stop was not stopped at once")
	}
}
