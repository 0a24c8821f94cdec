package testwait

import (
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	n := 0
	For(t, time.Second, "three checks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond checked %d times, want 3", n)
	}
}

func TestRecvAndClosed(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, ch, time.Second, "a value"); v != 7 {
		t.Fatalf("Recv = %d, want 7", v)
	}
	done := make(chan struct{})
	close(done)
	Closed(t, done, time.Second, "done closes")
}
