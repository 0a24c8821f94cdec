package discovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// Session is one module instance's registration: Start registers it and renews it
// on a cadence well inside the lease (min(5 s, lease/4), growing on failures up to
// 30 s); SetInitialized and Drain report those states at once; Close unregisters it.
// After LEASE_EXPIRED (the engine was away longer than the lease, or an admin evicted
// it) it registers again under the same instance id with a new lease token. A refusal
// other than the registry being unavailable ends the renewals: Err says why.
type Session struct {
	c       *Client
	desc    *pb.ModuleDescriptor
	id      string
	rollout string
	cohort  []string

	mu          sync.Mutex
	token       string
	lease       time.Duration
	status      string
	initialized bool
	draining    bool
	err         error
	renewMu     sync.Mutex // one register or renew at a time

	cancel context.CancelFunc
	done   chan struct{}
}

// NewSession is the registration of one instance of descriptor's module. instanceID
// empty makes a random uuid4, as the SDK does.
func NewSession(c *Client, descriptor *pb.ModuleDescriptor, instanceID, rolloutID string, rolloutModules []string) (*Session, error) {
	if instanceID == "" {
		instanceID = uuid4()
	}
	return &Session{c: c, desc: proto.Clone(descriptor).(*pb.ModuleDescriptor), id: instanceID, rollout: rolloutID,
		cohort: rolloutModules, token: newLeaseToken(), lease: 20 * time.Second, status: "STARTING"}, nil
}

func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newLeaseToken is 32 lowercase hex characters, the SDK's (uuid4().hex) and the
// registry's minimum.
func newLeaseToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// InstanceID is the instance's id; it stays the same across registrations.
func (s *Session) InstanceID() string { return s.id }

// Status is the status the registry answered last (STARTING, READY, DEGRADED, STAGED,
// DRAINING).
func (s *Session) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Err is why the renewals ended, nil while they go on.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Start registers the instance and starts renewing it.
func (s *Session) Start(ctx context.Context) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go s.heartbeat(hctx)
	return nil
}

// SetInitialized reports that the instance is ready for work (once its dependencies
// are READY, the registry makes it READY).
func (s *Session) SetInitialized(ctx context.Context) error {
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	return s.renew(ctx)
}

// Drain reports that the instance takes no new work.
func (s *Session) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	return s.renew(ctx)
}

// Close stops the renewals and unregisters the instance; if that fails, its lease
// expires.
func (s *Session) Close(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.mu.Lock()
	tok := s.token
	s.status = "STOPPED"
	s.mu.Unlock()
	var r pb.UnregisterResponse
	return s.c.call(ctx, "unregister", &pb.UnregisterRequest{InstanceId: s.id, LeaseToken: tok}, &r)
}

func (s *Session) register(ctx context.Context) error {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	s.mu.Lock()
	req := &pb.RegisterRequest{Descriptor_: s.desc, InstanceId: s.id, LeaseToken: s.token, RolloutId: s.rollout, RolloutModules: s.cohort}
	s.mu.Unlock()
	var r pb.RegisterResponse
	if err := s.c.call(ctx, "register", req, &r); err != nil {
		return err
	}
	s.answered(r.Instance, r.LeaseSeconds)
	return nil
}

func (s *Session) renew(ctx context.Context) error {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	s.mu.Lock()
	req := &pb.RenewRequest{InstanceId: s.id, LeaseToken: s.token, Initialized: s.initialized, Draining: s.draining}
	s.mu.Unlock()
	var r pb.RenewResponse
	if err := s.c.call(ctx, "renew", req, &r); err != nil {
		return err
	}
	s.answered(r.Instance, r.LeaseSeconds)
	return nil
}

func (s *Session) answered(inst *pb.Instance, leaseSeconds float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = inst.GetStatus()
	if leaseSeconds > 0 {
		s.lease = time.Duration(leaseSeconds * float64(time.Second))
	}
	if s.status == "DRAINING" {
		s.draining = true // a newer rollout replaced this one
	}
}

// delay is the pause before the next renewal: min(5 s, lease/4), doubled per failure
// (at most 3 times), at most 30 s.
func (s *Session) delay(failures int) time.Duration {
	s.mu.Lock()
	lease := s.lease
	s.mu.Unlock()
	d := min(5*time.Second, lease/4) << min(failures, 3)
	return min(d, 30*time.Second)
}

// heartbeat renews until ctx ends or the registry refuses the instance for good.
func (s *Session) heartbeat(ctx context.Context) {
	defer close(s.done)
	failures := 0
	for {
		t := time.NewTimer(s.delay(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := s.renew(ctx)
		if errors.Is(err, ErrLeaseExpired) {
			// The record is gone: a new token, the same instance id.
			s.mu.Lock()
			s.token, s.status = newLeaseToken(), "STARTING"
			s.mu.Unlock()
			err = s.register(ctx)
		}
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return
		case retryable(err):
			failures++
		default:
			s.mu.Lock()
			s.err = fmt.Errorf("discovery: renewals of %s ended: %w", s.id, err)
			s.mu.Unlock()
			return
		}
	}
}

// retryable: the registry or the broker is away for now.
func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true // NATS errors, timeouts
	}
	switch e.Code {
	case "LEASE_EXPIRED", "UNAVAILABLE", "REGISTRY_BUSY", "INTERNAL", "RESOURCE_EXHAUSTED":
		return true
	}
	return errors.Is(err, nats.ErrNoResponders)
}
