package epoch

import (
	"context"
	"testing"
	"testing/synctest"
)

// A write held back during an adoption waits for it and learns the record moved on;
// with no adoption under way it learns at once that nothing did.
func TestAwaitAdoption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &memRecords{}
		var h Held
		if err := h.Adopt(ctx, m, store, 1); err != nil {
			t.Fatal(err)
		}
		used := h.Load()
		if h.AwaitAdoption(used) {
			t.Fatal("AwaitAdoption with no adoption under way reported a move")
		}
		release := make(chan struct{})
		m.between = func() { <-release } // the adoption of 2 stops after its read
		adopted := make(chan error, 1)
		go func() { adopted <- h.Adopt(ctx, m, store, 2) }()
		synctest.Wait()
		moved := make(chan bool, 1)
		go func() { moved <- h.AwaitAdoption(used) }()
		synctest.Wait()
		select {
		case <-moved:
			t.Fatal("AwaitAdoption returned while the adoption was under way")
		default:
		}
		close(release)
		if err := <-adopted; err != nil {
			t.Fatal(err)
		}
		if !<-moved {
			t.Fatal("AwaitAdoption did not report the record the adoption left")
		}
		if h.AwaitAdoption(h.Load()) {
			t.Fatal("AwaitAdoption after the adoption reported a move")
		}
	})
}
