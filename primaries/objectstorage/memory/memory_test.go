package memory

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/objtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	clock := objtest.NewClock()
	objtest.Run(t, func(*testing.T) objectstorage.Store { return New(WithNow(clock.Now)) }, objtest.WithClock(clock))
}

func TestLocalStorage(t *testing.T) {
	if got := New().LocalStorage(); got != "this process" {
		t.Fatalf("LocalStorage = %q", got)
	}
}
