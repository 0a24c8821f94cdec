package discovery

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/failpoint"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// Group commit: every mutation of the registry rewrites its one value, so concurrent
// mutations are folded into one write. A mutation joins the pending list; the caller
// that finds no writer becomes it and writes, batch after batch, everything pending
// until nothing is; the others wait for their result. In a batch each mutation runs in
// arrival order on a copy of the state the previous ones left, and fails alone; the
// batch is one compare-and-swap, read and applied again from scratch on a conflict, at
// most maxWriteAttempts times.

// apply is one mutation: it changes st (the live records) in place and returns its
// reply, or fails and leaves the batch's state as it was.
type apply func(st *pb.RegistryState, now float64) (any, error)

type mutation struct {
	apply apply
	done  chan struct{} // closed once res and err are final
	res   any
	err   error
	taken bool // a writer took it; guarded by Service.mu
}

// mutate runs fn as part of the next write. A caller whose ctx ends before a writer took
// its mutation gets ctx's error and the mutation is dropped; once taken it is written
// whatever happens to the caller, who then waits for the outcome.
func (s *Service) mutate(ctx context.Context, fn apply) (any, error) {
	m := &mutation{apply: fn, done: make(chan struct{})}
	s.mu.Lock()
	s.pending = append(s.pending, m)
	if s.writing {
		s.mu.Unlock()
		select {
		case <-m.done:
		case <-ctx.Done():
			s.mu.Lock()
			if !m.taken {
				for i, p := range s.pending {
					if p == m {
						s.pending = append(s.pending[:i], s.pending[i+1:]...)
						break
					}
				}
				s.mu.Unlock()
				return nil, ctx.Err()
			}
			s.mu.Unlock()
			<-m.done
		}
		return m.res, m.err
	}
	s.writing = true
	for {
		batch := s.pending
		s.pending = nil
		for _, b := range batch {
			b.taken = true
		}
		if len(batch) == 0 {
			s.writing = false
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		s.write(batch)
		s.mu.Lock()
	}
	<-m.done
	return m.res, m.err
}

// write applies batch and stores the result: at most maxWriteAttempts reads and
// compare-and-swaps, then REGISTRY_BUSY. A store that fails fails the whole batch. The
// store calls are bounded by writeTimeout, not by a caller's context: the batch holds
// other callers' mutations.
func (s *Service) write(batch []*mutation) {
	defer func() {
		for _, m := range batch {
			close(m.done)
		}
	}()
	fail := func(err error) {
		for _, m := range batch {
			m.res, m.err = nil, err
		}
	}
	for range maxWriteAttempts {
		now := s.now()
		err := s.attempt(batch, now)
		if errors.Is(err, ErrRevisionConflict) {
			continue
		}
		if err != nil {
			fail(err)
		}
		return
	}
	fail(refuse(ErrRegistryBusy, textBusy))
}

// attempt is one read, apply and compare-and-swap of batch.
func (s *Service) attempt(batch []*mutation, now float64) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	st, rev, err := s.read(ctx, now)
	if err != nil {
		return err
	}
	changed := false
	for _, m := range batch {
		cp := proto.Clone(st).(*pb.RegistryState)
		res, err := m.apply(cp, now)
		if err == nil && proto.Size(cp) > MaxSnapshotBytes {
			res, err = nil, refuse(ErrRegistryFull, textTooLarge)
		}
		m.res, m.err = res, err
		if err == nil {
			st, changed = cp, true
		}
	}
	if !changed {
		return nil
	}
	if failpoint.Enabled {
		s.dropRecord(st)
	}
	data, err := proto.Marshal(st)
	if err != nil {
		return err
	}
	if err := s.store.CompareAndSwap(ctx, data, rev); err != nil {
		return err
	}
	s.mu.Lock()
	s.snap = snapshot{taken: now, state: st}
	s.writes++
	s.mu.Unlock()
	return nil
}
