package leasetest_test

import (
	"testing"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemStoreContract(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return leasetest.NewMemStore() })
}
