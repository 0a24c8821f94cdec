package discovery

import (
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/failpoint"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// The registry's fail points: each is a bug the chaos scenario discovery is there to
// catch (docs/chaos.md). Their callers call them only when failpoint.Enabled, a
// constant false without the tag failpoints, so a release binary has neither
// (TestReleaseBinaryHasNoFailpoints).

// dropRecordEvery is how often drop-registry-record strikes: one write in so many, so
// that the registry mostly works and the loss shows as one instance gone at a time.
const dropRecordEvery = 10

// dropRecord is drop-registry-record: every dropRecordEvery-th write leaves out the
// state's first record, as a store that loses a record on write would.
func (s *Service) dropRecord(st *pb.RegistryState) {
	if !failpoint.On(s.fp, failpoint.DropRegistryRecord) || len(st.GetRecords()) == 0 {
		return
	}
	s.mu.Lock()
	strike := s.writes%dropRecordEvery == dropRecordEvery-1
	s.mu.Unlock()
	if strike {
		st.Records = st.Records[1:]
	}
}

// registerTwice is register-twice: the record a register creates is stored twice, two
// instances under one register call.
func (s *Service) registerTwice(st *pb.RegistryState, rec *pb.RegistryRecord) {
	if failpoint.On(s.fp, failpoint.RegisterTwice) {
		st.Records = append(st.Records, proto.Clone(rec).(*pb.RegistryRecord))
	}
}
