package discovery

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/failpoint"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// Limits of the registry, the Python service's.
const (
	MaxLiveInstances = 256
	maxWriteAttempts = 5
	maxPage          = 100
	// snapshotSeconds is how long an agent's polls may be accepted from the last state
	// this engine read or wrote, without a read.
	snapshotSeconds = 1.0
)

// DefaultAdmins are the identities that may evict: the admin app's and the engine's.
var DefaultAdmins = []string{"api", "engine"}

// Clock is the wall clock in Unix seconds: expires_at and registered_at are compared by
// every engine, Python ones included, so they cannot be monotonic readings.
type Clock func() float64

// WallClock is the real wall clock.
func WallClock() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// Config is what a Service needs besides its store.
type Config struct {
	// Lease is a module instance's membership lease; at least 1 s.
	Lease time.Duration
	// Clock, optional, is WallClock by default.
	Clock Clock
	// Admins, optional, are the identities that may evict; DefaultAdmins by default.
	Admins []string
	// WriteTimeout bounds each read and compare-and-swap of a write; 10 s by default.
	WriteTimeout time.Duration
	// Failpoints, in a build with the tag failpoints, makes the registry misbehave on
	// purpose for the chaos harness (failpoints.go); nil for none.
	Failpoints *failpoint.Set
}

// Service is the registry's logic over a Store. It is safe for concurrent use.
type Service struct {
	store        Store
	lease        float64
	now          Clock
	admins       []string
	writeTimeout time.Duration
	fp           *failpoint.Set

	mu      sync.Mutex
	pending []*mutation // waiting for the writer, in arrival order
	writing bool        // a caller is the writer now
	snap    snapshot
	writes  int // compare-and-swaps that succeeded, for tests and metrics
}

// snapshot is the last state this Service read or wrote, whole (expired records kept),
// never changed once taken.
type snapshot struct {
	taken float64
	state *pb.RegistryState
}

// New makes the Service of store.
func New(store Store, cfg Config) (*Service, error) {
	lease := cfg.Lease.Seconds()
	if math.IsNaN(lease) || math.IsInf(lease, 0) || lease < 1 {
		return nil, errors.New("discovery: lease_seconds must be finite and at least 1")
	}
	admins := cfg.Admins
	if admins == nil {
		admins = DefaultAdmins
	}
	for _, a := range admins {
		if a == "" {
			return nil, errors.New("discovery: admin identities must be named")
		}
	}
	s := &Service{store: store, lease: lease, now: cfg.Clock, admins: slices.Clone(admins), writeTimeout: cfg.WriteTimeout, fp: cfg.Failpoints}
	if s.now == nil {
		s.now = WallClock
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = 10 * time.Second
	}
	return s, nil
}

// IsAdmin reports whether identity is one of the admin identities.
func (s *Service) IsAdmin(identity string) bool { return slices.Contains(s.admins, identity) }

// LiveInstances is how many live instances the registry held when this engine last
// read or wrote it (expiry checked now); 0 before the first read.
func (s *Service) LiveInstances() int {
	s.mu.Lock()
	st := s.snap.state
	s.mu.Unlock()
	now, n := s.now(), 0
	for _, r := range st.GetRecords() {
		if r.GetInstance().GetExpiresAt() > now {
			n++
		}
	}
	return n
}

// Writes is how many writes (compare-and-swaps) succeeded.
func (s *Service) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// read reads and decodes the registry, refreshes the snapshot and returns its live
// records (expires_at after now), in stored order, with the revision. What the caller
// gets is its own copy; fields this version does not know are kept in it.
func (s *Service) read(ctx context.Context, now float64) (*pb.RegistryState, uint64, error) {
	data, rev, err := s.store.Read(ctx)
	if err != nil {
		return nil, 0, err
	}
	st := &pb.RegistryState{}
	if err := proto.Unmarshal(data, st); err != nil {
		return nil, 0, fmt.Errorf("discovery: the registry's value (revision %d) is not a RegistryState: %w", rev, err)
	}
	s.mu.Lock()
	s.snap = snapshot{taken: now, state: proto.Clone(st).(*pb.RegistryState)}
	s.mu.Unlock()
	st.Records = slices.DeleteFunc(st.Records, func(r *pb.RegistryRecord) bool { return r.GetInstance().GetExpiresAt() <= now })
	return st, rev, nil
}

func find(st *pb.RegistryState, id string) (int, *pb.RegistryRecord) {
	for i, r := range st.GetRecords() {
		if r.GetInstance().GetInstanceId() == id {
			return i, r
		}
	}
	return -1, nil
}

func leaseHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// authorized: the caller is the record's owner and holds its lease token.
func authorized(r *pb.RegistryRecord, owner, token string) bool {
	same := subtle.ConstantTimeCompare([]byte(leaseHash(token)), []byte(r.GetLeaseHash())) == 1
	return r.GetOwner() == owner && same
}

func (s *Service) remaining(inst *pb.Instance, now float64) float64 {
	return max(0, inst.GetExpiresAt()-now)
}

func instanceCopy(r *pb.RegistryRecord) *pb.Instance {
	return proto.Clone(r.GetInstance()).(*pb.Instance)
}

// Register registers an instance, or confirms its registration again (a retried
// register neither changes nor extends it), for owner, the caller's identity.
func (s *Service) Register(ctx context.Context, req *pb.RegisterRequest, owner string) (*pb.RegisterResponse, error) {
	members, err := validateRequest(req)
	if err != nil {
		return nil, err
	}
	out, err := s.mutate(ctx, func(st *pb.RegistryState, now float64) (any, error) {
		if err := validateAgainst(st, req, members); err != nil {
			return nil, err
		}
		_, rec := find(st, req.GetInstanceId())
		if rec != nil {
			if !authorized(rec, owner, req.GetLeaseToken()) {
				return nil, refuse(ErrPermissionDenied, textNotOwner)
			}
			if !proto.Equal(rec.GetInstance().GetDescriptor_(), req.GetDescriptor_()) || rec.GetRolloutId() != req.GetRolloutId() ||
				!slices.Equal(rec.GetRolloutModules(), members) {
				return nil, refuse(ErrDescriptorConflict, textIdentityChange)
			}
		} else {
			if len(st.GetRecords()) >= MaxLiveInstances {
				return nil, refuse(ErrRegistryFull, textFull)
			}
			rec = &pb.RegistryRecord{
				Owner: owner, LeaseHash: leaseHash(req.GetLeaseToken()), RolloutId: req.GetRolloutId(),
				RegisteredAt: now, RolloutModules: members,
				Instance: &pb.Instance{
					Descriptor_: proto.Clone(req.GetDescriptor_()).(*pb.ModuleDescriptor),
					InstanceId:  req.GetInstanceId(), ExpiresAt: now + s.lease, RolloutId: req.GetRolloutId(),
				},
			}
			st.Records = append(st.Records, rec)
			if failpoint.Enabled {
				s.registerTwice(st, rec)
			}
		}
		ready(st)
		return &pb.RegisterResponse{Instance: instanceCopy(rec), LeaseSeconds: s.remaining(rec.GetInstance(), now)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*pb.RegisterResponse), nil
}

// Renew extends an instance's lease and records that it is initialized or draining
// (both only ever turn on).
func (s *Service) Renew(ctx context.Context, req *pb.RenewRequest, owner string) (*pb.RenewResponse, error) {
	out, err := s.mutate(ctx, func(st *pb.RegistryState, now float64) (any, error) {
		_, rec := find(st, req.GetInstanceId())
		if rec == nil {
			return nil, refuse(ErrLeaseExpired, textRenewExpired)
		}
		if !authorized(rec, owner, req.GetLeaseToken()) {
			return nil, refuse(ErrPermissionDenied, textNotOwner)
		}
		rec.Initialized = rec.GetInitialized() || req.GetInitialized()
		rec.Draining = rec.GetDraining() || req.GetDraining()
		rec.GetInstance().ExpiresAt = now + s.lease
		ready(st)
		return &pb.RenewResponse{Instance: instanceCopy(rec), LeaseSeconds: s.remaining(rec.GetInstance(), now)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*pb.RenewResponse), nil
}

// Unregister removes an instance; one already gone is no error.
func (s *Service) Unregister(ctx context.Context, req *pb.UnregisterRequest, owner string) (*pb.UnregisterResponse, error) {
	_, err := s.mutate(ctx, func(st *pb.RegistryState, now float64) (any, error) {
		i, rec := find(st, req.GetInstanceId())
		if rec == nil {
			return nil, nil
		}
		if !authorized(rec, owner, req.GetLeaseToken()) {
			return nil, refuse(ErrPermissionDenied, textNotOwner)
		}
		st.Records = slices.Delete(st.Records, i, i+1)
		ready(st)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.UnregisterResponse{}, nil
}

// Evict removes an instance now, for an admin identity; the evicted process hears it
// as LEASE_EXPIRED at its next renew.
func (s *Service) Evict(ctx context.Context, req *pb.EvictRequest, owner string) (*pb.EvictResponse, error) {
	if !slices.Contains(s.admins, owner) {
		return nil, refuse(ErrPermissionDenied, textNotAdmin)
	}
	if !validName(req.GetInstanceId()) {
		return nil, refuse(ErrInvalidArgument, textInstanceID)
	}
	out, err := s.mutate(ctx, func(st *pb.RegistryState, now float64) (any, error) {
		ready(st)
		i, rec := find(st, req.GetInstanceId())
		if rec == nil {
			return nil, refuse(ErrInstanceNotFound, req.GetInstanceId())
		}
		inst := instanceCopy(rec)
		st.Records = slices.Delete(st.Records, i, i+1)
		ready(st)
		return &pb.EvictResponse{Instance: inst}, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*pb.EvictResponse), nil
}

// GetModule returns every live instance of a module at a contract major, whatever its
// status, by instance id.
func (s *Service) GetModule(ctx context.Context, req *pb.GetModuleRequest) (*pb.GetModuleResponse, error) {
	if !validName(req.GetModuleId()) || req.GetContractMajor() == 0 {
		return nil, refuse(ErrInvalidArgument, textModuleArgs)
	}
	st, _, err := s.read(ctx, s.now())
	if err != nil {
		return nil, err
	}
	ready(st)
	var any bool
	var out []*pb.Instance
	for _, r := range st.GetRecords() {
		if nodeOf(r).module != req.GetModuleId() {
			continue
		}
		any = true
		if nodeOf(r).major == req.GetContractMajor() {
			out = append(out, r.GetInstance())
		}
	}
	switch {
	case !any:
		return nil, refuse(ErrModuleNotFound, req.GetModuleId())
	case len(out) == 0:
		return nil, refuse(ErrIncompatible, req.GetModuleId())
	}
	slices.SortStableFunc(out, byID)
	return &pb.GetModuleResponse{Instances: out}, nil
}

func byID(a, b *pb.Instance) int { return strings.Compare(a.GetInstanceId(), b.GetInstanceId()) }

// ListModules pages through every live instance by instance id, after the exclusive
// cursor.
func (s *Service) ListModules(ctx context.Context, req *pb.ListModulesRequest) (*pb.ListModulesResponse, error) {
	if req.GetLimit() < 1 || req.GetLimit() > maxPage {
		return nil, refuse(ErrInvalidArgument, textPageSize)
	}
	st, _, err := s.read(ctx, s.now())
	if err != nil {
		return nil, err
	}
	ready(st)
	var all []*pb.Instance
	for _, r := range st.GetRecords() {
		if r.GetInstance().GetInstanceId() > req.GetAfterInstanceId() {
			all = append(all, r.GetInstance())
		}
	}
	slices.SortStableFunc(all, byID)
	resp := &pb.ListModulesResponse{Instances: all}
	if len(all) > int(req.GetLimit()) {
		resp.Instances = all[:req.GetLimit()]
		resp.NextAfterInstanceId = resp.Instances[len(resp.Instances)-1].GetInstanceId()
	}
	return resp, nil
}

// AuthorizeAgent checks, for an agent host, that its registration is live and its own,
// that it declares the agent as invocable, and for a new invocation that it is READY.
// Polls (not new invocations) may be accepted from a snapshot under a second old; a
// refusal there is checked again on a fresh read.
func (s *Service) AuthorizeAgent(ctx context.Context, req *pb.AuthorizeAgentRequest, owner string) error {
	check := func(rec *pb.RegistryRecord) error {
		if !authorized(rec, owner, req.GetLeaseToken()) {
			return refuse(ErrPermissionDenied, textNotOwner)
		}
		if !slices.ContainsFunc(rec.GetInstance().GetDescriptor_().GetAgents(), func(a *pb.AgentDescriptor) bool {
			return a.GetName() == req.GetAgentName() && slices.Contains(a.GetCapabilities(), agentInvoke)
		}) {
			return refuse(ErrAgentNotFound, req.GetAgentName())
		}
		if req.GetNewInvocation() && rec.GetInstance().GetStatus() != StatusReady {
			return refuse(ErrModuleUnavailable, textNotReady)
		}
		return nil
	}
	now := s.now()
	if !req.GetNewInvocation() {
		s.mu.Lock()
		snap := s.snap
		s.mu.Unlock()
		if age := now - snap.taken; snap.state != nil && age >= 0 && age < snapshotSeconds {
			if _, rec := find(snap.state, req.GetInstanceId()); rec != nil && rec.GetInstance().GetExpiresAt() > now && check(rec) == nil {
				return nil
			}
		}
	}
	st, _, err := s.read(ctx, now)
	if err != nil {
		return err
	}
	ready(st)
	_, rec := find(st, req.GetInstanceId())
	if rec == nil {
		return refuse(ErrLeaseExpired, textProviderExpired)
	}
	return check(rec)
}

// AuthorizeModel checks, for a model host, that its registration is live and its own,
// that it declares the chat model, and that it is READY; always on a fresh read.
func (s *Service) AuthorizeModel(ctx context.Context, req *pb.AuthorizeModelRequest, owner string) error {
	st, _, err := s.read(ctx, s.now())
	if err != nil {
		return err
	}
	ready(st)
	_, rec := find(st, req.GetInstanceId())
	switch {
	case rec == nil:
		return refuse(ErrLeaseExpired, textProviderExpired)
	case !authorized(rec, owner, req.GetLeaseToken()):
		return refuse(ErrPermissionDenied, textNotOwner)
	case !slices.ContainsFunc(rec.GetInstance().GetDescriptor_().GetModels(), func(m *pb.ModelDescriptor) bool {
		return m.GetName() == req.GetModelName() && m.GetKind() == "chat"
	}):
		return refuse(ErrModelNotFound, req.GetModelName())
	case rec.GetInstance().GetStatus() != StatusReady:
		return refuse(ErrModuleUnavailable, textNotReady)
	}
	return nil
}
