// Package bufpool reuses the byte buffers that requests are encoded into. A request
// body is free once the call that sent it returns (nats.go copies it into its write
// buffer as it publishes it), so a busy client need not allocate one per call.
package bufpool

import "sync"

// Pool holds buffers of at least Size bytes' capacity and keeps none above Max, so one
// large request does not pin its memory. The zero Pool is not usable: set both.
type Pool struct {
	Size, Max int
	p         sync.Pool // of *[]byte
}

// Get returns an empty buffer; give it back with Put once nothing refers to it.
func (p *Pool) Get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, p.Size)
	return &b
}

// Put keeps b's storage, grown to used (what was appended to *b), for reuse, unless it
// outgrew Max. The caller must not touch used or b afterwards.
func (p *Pool) Put(b *[]byte, used []byte) {
	if cap(used) > p.Max {
		return
	}
	*b = used[:0]
	p.p.Put(b)
}
