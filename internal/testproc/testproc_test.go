package testproc

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

func TestOutputTakesConcurrentWrites(t *testing.T) {
	var o Output
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&o, "%d", i)
				_ = o.String()
			}
		})
	}
	wg.Wait()
	if n := len(o.String()); n != 800 {
		t.Fatalf("%d bytes written, want 800", n)
	}
}

func TestFreePortCanBeBound(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d: %v", p, err)
	}
	_ = l.Close()
}
