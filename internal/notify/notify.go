// Package notify publishes a value that many goroutines read and some wait on: one
// atomic load to read it, and a channel that closes when it is replaced, so a waiter
// never polls. It is the one close-and-replace primitive of the engine: actors publish
// their snapshots through it (docs/design.md §3: handles read published snapshots), and
// handles wait on it for a state they need.
package notify

import (
	"context"
	"sync"
	"sync/atomic"
)

// Value holds the latest published T. The zero Value is not usable; use New.
type Value[T any] struct {
	mu  sync.Mutex // serializes Store; readers never take it
	cur atomic.Pointer[version[T]]
}

type version[T any] struct {
	v       T
	changed chan struct{} // closed when this version is replaced
}

// New returns a Value holding v.
func New[T any](v T) *Value[T] {
	n := &Value[T]{}
	n.cur.Store(&version[T]{v: v, changed: make(chan struct{})})
	return n
}

// Load is the latest published value.
func (n *Value[T]) Load() T { return n.cur.Load().v }

// Watch is the latest value and a channel closed once a newer one is published.
func (n *Value[T]) Watch() (T, <-chan struct{}) {
	c := n.cur.Load()
	return c.v, c.changed
}

// Store publishes v and wakes every waiter.
func (n *Value[T]) Store(v T) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.cur.Load()
	n.cur.Store(&version[T]{v: v, changed: make(chan struct{})})
	close(old.changed)
}

// Update publishes f(latest) unless f reports no change; f runs under the Value's
// lock, so concurrent updates do not lose each other's changes.
func (n *Value[T]) Update(f func(T) (T, bool)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.cur.Load()
	v, changed := f(old.v)
	if !changed {
		return
	}
	n.cur.Store(&version[T]{v: v, changed: make(chan struct{})})
	close(old.changed)
}

// Wait returns the first published value for which ok holds, checking the latest one
// first, or the latest value and ctx's error.
func (n *Value[T]) Wait(ctx context.Context, ok func(T) bool) (T, error) {
	for {
		v, changed := n.Watch()
		if ok(v) {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return v, context.Cause(ctx)
		}
	}
}
