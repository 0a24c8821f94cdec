package bufpool

import "testing"

func TestPoolKeepsOnlyBuffersUpToMax(t *testing.T) {
	p := &Pool{Size: 8, Max: 64}
	b := p.Get()
	if len(*b) != 0 || cap(*b) < 8 {
		t.Fatalf("a new buffer has len %d cap %d, want empty with cap >= 8", len(*b), cap(*b))
	}
	used := append(*b, "a request"...)
	p.Put(b, used)
	if cap(*b) != cap(used) || len(*b) != 0 {
		t.Fatalf("a returned buffer keeps len %d cap %d, want empty with the grown cap %d", len(*b), cap(*b), cap(used))
	}
	big := p.Get()
	before := cap(*big)
	grown := append(*big, make([]byte, 65)...)
	p.Put(big, grown)
	if cap(*big) != before {
		t.Fatalf("a buffer grown to %d, above Max 64, was kept for reuse", cap(grown))
	}
}
