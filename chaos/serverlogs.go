package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// nodeLog is a cluster node's log in the run's output (logs/<node>.log): what
// nats-server notices, warns of and errs on, and of its debug lines those of its raft
// groups' leadership (a step-down and the peer it hands over to, a campaign, a vote, a
// new leader), which tell a stream's hand-over that landed from one that did not. The
// other debug lines (thousands a second while a replica catches up) are left out.
type nodeLog struct {
	mu sync.Mutex
	f  *os.File
}

// leadership are the words of the raft debug lines a node log keeps.
var leadership = []string{"leader", "Leader", "campaign", "Campaign", "candidate", "vote", "Vote", "stepdown", "Stepping down", "stepping down", "Switching to"}

func (l *nodeLog) line(level, format string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s [%s] %s\n", time.Now().UTC().Format("15:04:05.000000"), level, fmt.Sprintf(format, args...))
}

func (l *nodeLog) Noticef(format string, args ...any) { l.line("INF", format, args) }
func (l *nodeLog) Warnf(format string, args ...any)   { l.line("WRN", format, args) }
func (l *nodeLog) Fatalf(format string, args ...any)  { l.line("FTL", format, args) }
func (l *nodeLog) Errorf(format string, args ...any)  { l.line("ERR", format, args) }
func (l *nodeLog) Tracef(string, ...any)              {}

func (l *nodeLog) Debugf(format string, args ...any) {
	if !strings.HasPrefix(format, "RAFT") {
		return
	}
	msg := fmt.Sprintf(format, args...)
	for _, w := range leadership {
		if strings.Contains(msg, w) {
			l.line("DBG", "%s", []any{msg})
			return
		}
	}
}

// logNode points node idx's logger at its log in the run's output (none without
// Options.Out); a node started again needs it again.
func (h *harness) logNode(idx int) {
	if h.opts.Out == "" {
		return
	}
	node := h.cluster.Nodes[idx]
	h.mu.Lock()
	if h.nodeLogs == nil {
		h.nodeLogs = map[int]*nodeLog{}
	}
	l := h.nodeLogs[idx]
	if l == nil {
		f, err := os.Create(filepath.Join(h.logDir, node.Name()+".log"))
		if err != nil {
			h.mu.Unlock()
			h.logf("%s: no log: %v", node.Name(), err)
			return
		}
		l = &nodeLog{f: f}
		h.nodeLogs[idx] = l
	}
	h.mu.Unlock()
	if r := node.Raw(); r != nil {
		r.SetLoggerV2(l, true, false, false)
	}
}

// closeNodeLogs closes the nodes' logs once the cluster has stopped.
func (h *harness) closeNodeLogs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.nodeLogs {
		l.mu.Lock()
		if err := l.f.Close(); err != nil {
			h.logf("node log: %v", err)
		}
		l.mu.Unlock()
	}
	h.nodeLogs = nil
}
