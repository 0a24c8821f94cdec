package bench

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// withTicks makes the progress ticker tick when the test sends on ch.
func withTicks(ch chan time.Time) Option {
	return func(o *options) {
		o.ticks = func(time.Duration) (<-chan time.Time, func()) { return ch, func() {} }
	}
}

// lineWriter hands every write to the test.
type lineWriter struct {
	mu    sync.Mutex
	all   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	w.lines <- string(p)
	return len(p), nil
}

var progressRE = regexp.MustCompile(`^ *\d+\.\ds  \d+ ops  \d+ ops/s  0 errors  p99 \S+\n$`)

func TestProgressLines(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "i", honest)
	ticks := make(chan time.Time)
	w := &lineWriter{lines: make(chan string, 4)}
	stop := make(chan struct{})
	reached := st.reaches(20)
	done := make(chan error, 1)
	go func() {
		_, err := Run(t.Context(), f.tr, testConfig(0), Progress(w, time.Hour), withTicks(ticks), StopOn(stop))
		done <- err
	}()
	<-reached
	ticks <- time.Now()
	line := <-w.lines
	if !progressRE.MatchString(line) {
		t.Errorf("progress line %q, want elapsed, ops, ops/s, errors, p99", line)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	last := <-w.lines
	if !progressRE.MatchString(last) {
		t.Errorf("final line %q", last)
	}
}

func TestProgressOnTerminalRedraws(t *testing.T) {
	var b bytes.Buffer
	p := &progressLine{w: &b, term: true}
	p.write(1500*time.Millisecond, 123456, 9999, 1, 0, time.Millisecond, false)
	p.write(1600*time.Millisecond, 5, 1, 0, 0, time.Millisecond, false)
	p.write(1700*time.Millisecond, 6, 1, 0, 0, time.Millisecond, true)
	out := b.String()
	parts := strings.Split(out, "\r")
	if len(parts) != 4 || parts[0] != "" || strings.Contains(parts[1], "\n") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("terminal output %q: want three \\r-led lines, a newline only at the end", out)
	}
	if len(parts[2]) != len(parts[1]) {
		t.Errorf("a shorter line %q does not cover the longer %q", parts[2], parts[1])
	}
	if isTerminal(&b) {
		t.Error("a buffer taken for a terminal")
	}
}
