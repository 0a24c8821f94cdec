package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

// memoryCgroup makes a cgroup under this process's own with a memory limit of limit
// bytes, removed at cleanup (registered first, so it runs after the processes put in it
// are gone). It skips the test, saying why, where cgroups cannot be made.
func memoryCgroup(t *testing.T, limit int64) (add func(pid int)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a memory cgroup needs root (CI runs as root)")
	}
	dir, limitFile, err := cgroupDir(t.Name())
	if err != nil {
		t.Skipf("no memory cgroup can be made here: %v", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no memory cgroup can be made here: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot set the memory limit of a cgroup here: %v", err)
	}
	return func(pid int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("move %d into the cgroup: %v", pid, err)
		}
	}
}

// cgroupDir finds where a child cgroup of this process's goes, on cgroup v2
// (memory.max) or v1 (memory.limit_in_bytes).
func cgroupDir(name string) (dir, limitFile string, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	name = "abi-e2e-" + strings.NewReplacer("/", "-", " ", "-").Replace(name) + "-" + strconv.Itoa(os.Getpid())
	sc := bufio.NewScanner(f)
	var v2 string
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "memory") {
			base := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			if _, err := os.Stat(filepath.Join(base, "memory.limit_in_bytes")); err == nil {
				return filepath.Join(base, name), "memory.limit_in_bytes", nil
			}
		}
		if parts[0] == "0" {
			v2 = parts[2]
		}
	}
	base := filepath.Join("/sys/fs/cgroup", v2)
	if ctl, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control")); err == nil && strings.Contains(string(ctl), "memory") {
		return filepath.Join(base, name), "memory.max", nil
	}
	return "", "", fmt.Errorf("neither a cgroup v1 memory hierarchy nor a v2 one with the memory controller delegated")
}

// procKiB reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the status of %d: %v", pid, err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in the status of %d", field, pid)
	return 0
}

// rawTransfer is a client of the transfer protocol on one connection: the engine
// sees one client per connection.
type rawTransfer struct {
	t  *testing.T
	nc *nats.Conn
}

// call sends req and returns the reply's error code ("" for success).
func (r rawTransfer) call(subject string, req, out any) protocol.Code {
	r.t.Helper()
	body, _ := json.Marshal(req)
	msg, err := r.nc.Request(subject, body, 20*time.Second)
	if err != nil {
		r.t.Fatalf("%s: %v", subject, err)
	}
	if code := msg.Header.Get(protocol.HeaderErrorCode); code != "" {
		return protocol.Code(code)
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			r.t.Fatal(err)
		}
	}
	return ""
}

func (r rawTransfer) open() (protocol.TransferOpenReply, protocol.Code) {
	meta, _ := json.Marshal(protocol.ObjectTransfer{Prefix: "e2e", Key: "big"})
	var rep protocol.TransferOpenReply
	code := r.call(protocol.TransferOpenSubject(objPrefix), protocol.TransferOpenRequest{Operation: protocol.OpTransferPut, Metadata: meta}, &rep)
	return rep, code
}

func (r rawTransfer) write(id string, seq uint64, data []byte) protocol.Code {
	subject, err := protocol.TransferSessionSubject(objPrefix, id, protocol.TransferWrite)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.call(subject, protocol.TransferWriteRequest{ID: id, Sequence: seq, Data: data}, nil)
}

func (r rawTransfer) close(id string) {
	subject, _ := protocol.TransferSessionSubject(objPrefix, id, protocol.TransferClose)
	r.call(subject, protocol.TransferCloseRequest{ID: id}, nil)
}

// TestOneClientCannotExhaustTheEnginesMemory is issue 15's done-when: in a
// memory-limited cgroup, one client opens object-storage transfer puts and writes
// chunks without ever starting them until the engine refuses; the engine is not
// killed, its RSS stays under the budget plus its idle size plus the runtime's headroom,
// a second client can still open and write a transfer, and once the sessions close the
// engine hands the memory back. Before the budget (1 GiB for any client, appended to
// buffers that doubled) the engine was OOM-killed by its own Kubernetes limit.
func TestOneClientCannotExhaustTheEnginesMemory(t *testing.T) {
	const (
		budgetMiB   = 96
		clientMiB   = 48
		headroomMiB = 128 // config.RuntimeHeadroomMiB: the margin this test states
		cgroupMiB   = budgetMiB + headroomMiB + 64
	)
	add := memoryCgroup(t, cgroupMiB<<20)
	srv := natstest.Start(t)
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t), ExtraYAML: fmt.Sprintf(
		"limits: {memory_mib: %d, client_memory_mib: %d, session_memory_mib: 16, client_sessions: 8}\n", budgetMiB, clientMiB)})
	add(p.cmd.Process.Pid)
	p.waitState("serving", 20*time.Second)
	pid := p.cmd.Process.Pid
	idle := procKiB(t, pid, "VmRSS")

	greedy := rawTransfer{t, natstest.Connect(t, srv.URL())}
	chunk := make([]byte, 512<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	var ids []string
	var held int64
	refused := protocol.Code("")
	for refused == "" {
		o, code := greedy.open()
		if code != "" {
			refused = code
			break
		}
		ids = append(ids, o.ID)
		for seq := uint64(0); ; seq++ {
			code := greedy.write(o.ID, seq, chunk[:min(len(chunk), o.ChunkBytes)])
			if code == protocol.PayloadTooLarge { // this session is full: open another
				break
			}
			if code != "" {
				refused = code
				break
			}
			held += int64(min(len(chunk), o.ChunkBytes))
		}
		select {
		case <-p.exited:
			t.Fatalf("the engine died while one client filled its transfers (%d MiB written)", held>>20)
		default:
		}
	}
	if refused != protocol.ResourceExhausted {
		t.Fatalf("the greedy client was refused with %s, want RESOURCE_EXHAUSTED", refused)
	}
	if held > clientMiB<<20 {
		t.Fatalf("one client held %d MiB, above its share of %d MiB", held>>20, clientMiB)
	}

	other := rawTransfer{t, natstest.Connect(t, srv.URL())}
	o, code := other.open()
	if code != "" {
		t.Fatalf("a second client could not open a transfer: %s", code)
	}
	if code := other.write(o.ID, 0, chunk[:min(len(chunk), o.ChunkBytes)]); code != "" {
		t.Fatalf("a second client could not write a chunk: %s", code)
	}

	peak := procKiB(t, pid, "VmHWM")
	bound := idle + (budgetMiB+headroomMiB)<<10
	t.Logf("idle RSS %d MiB, peak %d MiB after one client held %d MiB; bound %d MiB", idle>>10, peak>>10, held>>20, bound>>10)
	if peak > bound {
		t.Fatalf("peak RSS %d MiB passed idle %d + budget %d + headroom %d MiB", peak>>10, idle>>10, budgetMiB, headroomMiB)
	}

	// Closed sessions give their memory back, to the system too.
	for _, id := range append(ids, o.ID) {
		greedy.close(id)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		rss := procKiB(t, pid, "VmRSS")
		if rss <= idle+32<<10 {
			t.Logf("RSS back to %d MiB once the sessions closed", rss>>10)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RSS %d MiB 20 s after every session closed; idle was %d MiB", rss>>10, idle>>10)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-p.exited:
		t.Fatal("the engine exited")
	default:
	}
}
