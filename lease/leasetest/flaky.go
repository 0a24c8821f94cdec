package leasetest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/abi-engine/engine/lease"
)

// ErrInjected is the error Flaky returns for the calls it fails.
var ErrInjected = errors.New("leasetest: injected store failure")

// Flaky wraps a Store and, on demand, fails every call (a broker out of reach) or lets
// an Update land and then loses its reply (an ambiguous renewal).
type Flaky struct {
	lease.Store
	failing  atomic.Bool
	loseNext atomic.Bool
}

// NewFlaky wraps s.
func NewFlaky(s lease.Store) *Flaky { return &Flaky{Store: s} }

// Fail makes every call fail (true) or pass through again (false).
func (f *Flaky) Fail(on bool) { f.failing.Store(on) }

// LoseNextUpdateReply lets the next Update land and then reports ErrInjected.
func (f *Flaky) LoseNextUpdateReply() { f.loseNext.Store(true) }

func (f *Flaky) Read(ctx context.Context) (lease.Record, error) {
	if f.failing.Load() {
		return lease.Record{}, ErrInjected
	}
	return f.Store.Read(ctx)
}

func (f *Flaky) Create(ctx context.Context, h lease.Holder) (uint64, error) {
	if f.failing.Load() {
		return 0, ErrInjected
	}
	return f.Store.Create(ctx, h)
}

func (f *Flaky) Update(ctx context.Context, h lease.Holder, rev uint64) (uint64, error) {
	if f.failing.Load() {
		return 0, ErrInjected
	}
	next, err := f.Store.Update(ctx, h, rev)
	if err == nil && f.loseNext.CompareAndSwap(true, false) {
		return 0, ErrInjected
	}
	return next, err
}

func (f *Flaky) Delete(ctx context.Context, rev uint64) error {
	if f.failing.Load() {
		return ErrInjected
	}
	return f.Store.Delete(ctx, rev)
}

func (f *Flaky) Publish(ctx context.Context, p lease.Period) error {
	if f.failing.Load() {
		return ErrInjected
	}
	return f.Store.Publish(ctx, p)
}

func (f *Flaky) ReadEpoch(ctx context.Context) (lease.EpochRecord, error) {
	if f.failing.Load() {
		return lease.EpochRecord{}, ErrInjected
	}
	return f.Store.ReadEpoch(ctx)
}

func (f *Flaky) WriteEpoch(ctx context.Context, e lease.EpochRecord, rev uint64) (uint64, error) {
	if f.failing.Load() {
		return 0, ErrInjected
	}
	return f.Store.WriteEpoch(ctx, e, rev)
}
