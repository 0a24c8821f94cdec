package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// chunkSize is the largest read one direction of a link forwards at a time.
const chunkSize = 32 << 10

// queueDepth bounds the chunks a direction holds while cut or delayed; past it the
// reader stops reading and TCP flow control pushes back on the sender, as a real
// network does.
const queueDepth = 256

// Proxy forwards TCP connections from its own listener on 127.0.0.1 to a target,
// and can cut, reset or slow every connection through it.
//
// Cut is a partition that neither end notices: sockets stay open, bytes stop flowing in
// both directions and wait; Restore lets them through again, in order, as TCP would
// after a short partition heals. CutConnections does the same to the NATS connections
// of one name only (an engine's lease connection, say, while its service connection
// carries on). Reset closes every connection abruptly and refuses new ones until
// Restore. Slow delays every chunk by a latency.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	cut     bool
	cutName []string // CutConnections: names of the connections cut
	refuse  bool
	latency time.Duration
	changed chan struct{} // closed and replaced at every state change
	links   map[*link]struct{}
	closed  bool

	wg sync.WaitGroup
}

// NewProxy listens on a random port of 127.0.0.1 and forwards to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: listen: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Cut stops every byte in both directions, on the connections open now and on new
// ones, without closing anything.
func (p *Proxy) Cut() { p.set(func() { p.cut = true }) }

// Reset closes every connection at once (with a TCP reset) and refuses new ones until
// Restore.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.refuse = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.signal()
	p.mu.Unlock()
	for _, l := range links {
		l.abort()
	}
}

// CutConnections cuts, as Cut does, the NATS connections whose client names itself
// (the name of its CONNECT, nats.Name) with a name containing name: those open now and
// those opened later, once they have sent their CONNECT. Restore ends it.
func (p *Proxy) CutConnections(name string) { p.set(func() { p.cutName = append(p.cutName, name) }) }

// Restore ends a Cut, a CutConnections or a Reset: held bytes flow again and new
// connections are accepted. It keeps a Slow latency.
func (p *Proxy) Restore() { p.set(func() { p.cut, p.refuse, p.cutName = false, false, nil }) }

// Slow delays every chunk by d from when the proxy read it; 0 ends the delay.
func (p *Proxy) Slow(d time.Duration) { p.set(func() { p.latency = max(d, 0) }) }

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	p.signal()
}

// signal wakes every waiting writer; p.mu is held.
func (p *Proxy) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// gate is what a writer of l needs to know: whether bytes may flow, the latency, and
// a channel that closes at the next change.
func (p *Proxy) gate(l *link) (cut bool, latency time.Duration, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cut = p.cut
	if name := l.clientName(); !cut && name != "" {
		cut = slices.ContainsFunc(p.cutName, func(n string) bool { return strings.Contains(name, n) })
	}
	return cut, p.latency, p.changed
}

// Close stops listening, closes every connection and waits for every goroutine.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.abort()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			resetClose(c)
			continue
		}
		t, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			resetClose(c)
			continue
		}
		l := &link{p: p, a: c, b: t, done: make(chan struct{}), sniff: []byte{}}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.abort()
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(4)
		p.mu.Unlock()
		l.start()
	}
}

// resetClose closes c so the peer sees a reset, not an orderly end.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// link is one proxied connection: a is the client side, b the target side.
type link struct {
	p    *Proxy
	a, b net.Conn
	once sync.Once
	done chan struct{}

	// The name the client gave in its CONNECT, read from the first bytes it sent.
	nameMu sync.Mutex
	name   string
	sniff  []byte // the client's bytes until its first line; nil once read
}

// maxSniff bounds what a link keeps of the client's first bytes to find its CONNECT.
const maxSniff = 16 << 10

func (l *link) clientName() string {
	l.nameMu.Lock()
	defer l.nameMu.Unlock()
	return l.name
}

// learn reads the client's name from the CONNECT line it starts with, once.
func (l *link) learn(data []byte) {
	l.nameMu.Lock()
	if l.sniff == nil {
		l.nameMu.Unlock()
		return
	}
	l.sniff = append(l.sniff, data...)
	line, _, found := bytes.Cut(l.sniff, []byte("\r\n"))
	if !found && len(l.sniff) < maxSniff {
		l.nameMu.Unlock()
		return
	}
	l.sniff = nil
	if rest, ok := bytes.CutPrefix(line, []byte("CONNECT ")); ok {
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(rest, &c) == nil {
			l.name = c.Name
		}
	}
	l.nameMu.Unlock()
	l.p.set(func() {}) // wake the writers: the name may cut this link
}

type chunk struct {
	data []byte
	read time.Time
	eof  bool
}

func (l *link) start() {
	ab := make(chan chunk, queueDepth)
	ba := make(chan chunk, queueDepth)
	go l.read(l.a, ab)
	go l.write(l.b, ab)
	go l.read(l.b, ba)
	go l.write(l.a, ba)
}

// abort closes both sides at once; the link's goroutines then end.
func (l *link) abort() {
	l.once.Do(func() {
		close(l.done)
		resetClose(l.a)
		resetClose(l.b)
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

func (l *link) read(src net.Conn, out chan<- chunk) {
	defer l.p.wg.Done()
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 && src == l.a {
			l.learn(buf[:n])
		}
		if n > 0 {
			select {
			case out <- chunk{data: buf[:n], read: now}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			// The end travels like data, so a cut holds it back too.
			select {
			case out <- chunk{read: now, eof: true}:
			case <-l.done:
			}
			return
		}
	}
}

func (l *link) write(dst net.Conn, in <-chan chunk) {
	defer l.p.wg.Done()
	for {
		var c chunk
		select {
		case c = <-in:
		case <-l.done:
			return
		}
		if !l.wait(c.read) {
			return
		}
		if c.eof {
			l.abort()
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			l.abort()
			return
		}
	}
}

// wait holds a chunk read at read until the proxy is not cut and its latency has
// passed; false when the link ended meanwhile.
func (l *link) wait(read time.Time) bool {
	for {
		cut, latency, changed := l.p.gate(l)
		if !cut {
			d := time.Until(read.Add(latency))
			if d <= 0 {
				return true
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
				continue // re-check: a cut may have begun meanwhile
			case <-changed:
				t.Stop()
				continue
			case <-l.done:
				t.Stop()
				return false
			}
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}
