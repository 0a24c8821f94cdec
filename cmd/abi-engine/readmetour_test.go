package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
)

// tourCommand is one command line of the README's tour, with the comment lines that
// follow it (what the README says it prints).
type tourCommand struct {
	line    string
	says    string // the comment on its line and the comment lines after it
	section string
}

// readmeTour reads the sh blocks of the README's sections "Run it" and "A short tour":
// each block is a list of commands, as a reader would paste them.
func readmeTour(t *testing.T) [][]tourCommand {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]tourCommand
	var section string
	var block []tourCommand
	inBlock := false
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case !inBlock && line == "```sh":
			inBlock, block = true, nil
		case inBlock && line == "```":
			inBlock = false
			if section == "Run it" || section == "A short tour" {
				blocks = append(blocks, block)
			}
		case inBlock && strings.HasPrefix(strings.TrimSpace(line), "#"):
			if len(block) > 0 {
				block[len(block)-1].says += strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")) + "\n"
			}
		case inBlock && strings.TrimSpace(line) != "":
			cmd, comment, _ := strings.Cut(line, "   #")
			if i := strings.Index(cmd, "  #"); i >= 0 {
				cmd, comment = cmd[:i], cmd[i+3:]
			}
			block = append(block, tourCommand{line: strings.TrimSpace(cmd), says: strings.TrimSpace(comment) + "\n", section: section})
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("the README's tour has %d sh blocks, want at least 5", len(blocks))
	}
	return blocks
}

// shellWords splits a command line as sh would for the tour's commands: words
// separated by spaces, single quotes kept together and removed.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				words = append(words, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		words = append(words, cur.String())
	}
	return words
}

// tourProcess is a command of the tour as a child process.
type tourProcess struct {
	cmd    *exec.Cmd
	out    *testproc.Output // stdout and stderr
	exited chan struct{}
	code   int
	http   string // run's --http, where /readyz and /status answer
}

func (p *tourProcess) wait(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(bound):
		t.Fatalf("%s still runs after %s:\n%s", p.cmd, bound, p.out)
		return 0
	}
}

// tour runs the README's commands against real processes, in the order and the way the
// README gives them, with the addresses a test may use: the README's broker (nats:4222,
// its monitoring nats:8222) is a nats-server of the test, the fixed HTTP ports and the
// embedded broker's 4222 are free ports of 127.0.0.1.
type tour struct {
	t       *testing.T
	bin     string
	dir     string   // the working directory of every command
	env     []string // the environment of every command
	replace *strings.Replacer
	jobs    []*tourProcess // the block's background jobs, %1 first
}

func (r *tour) start(c tourCommand) *tourProcess {
	t := r.t
	t.Helper()
	words := shellWords(c.line)
	env := append([]string(nil), r.env...)
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		env = append(env, words[0])
		words = words[1:]
	}
	background := len(words) > 0 && words[len(words)-1] == "&"
	if background {
		words = words[:len(words)-1]
	}
	switch {
	case len(words) > 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/abi-engine":
		words = words[3:]
	case len(words) > 0 && words[0] == "abi-engine":
		words = words[1:]
	default:
		t.Fatalf("README tour: %q is not an abi-engine command", c.line)
	}
	for i, w := range words {
		words[i] = r.replace.Replace(w)
	}
	p := &tourProcess{out: &testproc.Output{}, exited: make(chan struct{})}
	for i, w := range words {
		if w == "--http" && i+1 < len(words) {
			p.http = words[i+1]
		}
	}
	if p.http == "" && len(words) > 0 && words[0] == "run" {
		p.http = envValue(env, "ABI_HTTP_LISTEN")
	}
	p.cmd = exec.Command(r.bin, words...)
	p.cmd.Dir, p.cmd.Env = r.dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	if background {
		r.jobs = append(r.jobs, p)
	}
	return p
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// state is what run's /status says of the engine, once /readyz answers 200.
func (p *tourProcess) state(t *testing.T) string {
	t.Helper()
	testwait.For(t, 60*time.Second, "GET "+p.http+"/readyz answers 200", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited %d before it was ready:\n%s", p.cmd, p.code, p.out)
		default:
		}
		code, _ := httpGet("http://" + p.http + "/readyz")
		return code == http.StatusOK
	})
	return statusState("http://" + p.http)
}

// statusState is the state in /status at base, "" when it does not answer.
func statusState(base string) string {
	_, body := httpGet(base + "/status")
	var st struct {
		State string `json:"state"`
	}
	_ = json.Unmarshal([]byte(body), &st)
	return st.State
}

// says checks that the README says phrase of c and that out shows it.
func says(t *testing.T, c tourCommand, out, phrase string) {
	t.Helper()
	if !strings.Contains(c.says, phrase) {
		t.Errorf("README: the comment of %q no longer says %q: %q", c.line, phrase, c.says)
	}
	if !strings.Contains(out, phrase) {
		t.Errorf("%q: the README says %q, the command printed:\n%s", c.line, phrase, out)
	}
}

// TestProcessREADMETour runs the README's "Run it" and "A short tour" as written, each
// command a real abi-engine process, and compares what matters with what the README
// says: exit codes, roles, the messages it quotes, doctor's verdicts.
func TestProcessREADMETour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	blocks := readmeTour(t)
	bin := buildBinary(t)
	broker := natstest.Start(t, withMonitor, func(o *server.Options) { o.SyncAlways = true })
	embedded := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)) }
	pairs := []string{
		"nats://nats:4222", broker.URL(), "http://nats:8222", monitorURL(broker),
		"nats://127.0.0.1:4222", "nats://" + embedded,
	}
	for _, port := range []string{"8081", "8082", "8083"} {
		addr := free()
		pairs = append(pairs, "127.0.0.1:"+port, addr, ":"+port, addr)
	}
	// "Run it" needs no configuration: a directory without one. The rest runs against
	// the test's broker with a lease of 4 s, so the refusal and the handovers take
	// seconds, in a directory whose abi-engine.yaml is the one doctor's --config names.
	bare := t.TempDir()
	withConfig := t.TempDir()
	writeFile(t, withConfig, "abi-engine.yaml", "nats:\n  engine: {lease_seconds: 4, drain_seconds: 2}\n")
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + bare,
		"ABI_NATS_EMBEDDED_LISTEN=" + embedded, "ABI_HTTP_LISTEN=" + free()}
	r := &tour{t: t, bin: bin, dir: bare, env: base, replace: strings.NewReplacer(pairs...)}
	known := 0
	for _, block := range blocks {
		r.jobs = nil
		for _, c := range block {
			if strings.Contains(c.line, "nats://nats:4222") {
				r.dir = withConfig
			}
			words := shellWords(c.line)
			t.Logf("README: %s", c.line)
			switch {
			case c.line == "go run ./cmd/abi-engine run":
				known++
				p := r.start(c)
				if st := p.state(t); st != "serving" {
					t.Errorf("%q: state %s, want serving", c.line, st)
				}
			case strings.Contains(c.line, "call keyvalue set"):
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 {
					t.Errorf("%q: exit %d:\n%s", c.line, code, p.out)
				}
			case strings.Contains(c.line, "call keyvalue get"):
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 || !strings.Contains(p.out.String(), `"value":"aGVsbG8="`) {
					t.Errorf("%q: exit %d, want the value set:\n%s", c.line, code, p.out)
				}
			case c.line == "go run ./cmd/abi-engine status":
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 || !strings.Contains(p.out.String(), "serving") {
					t.Errorf("%q: exit %d, want the serving engine:\n%s", c.line, code, p.out)
				}
			case c.line == "go run ./cmd/abi-engine doctor":
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 || !strings.Contains(p.out.String(), " 0 FAIL") {
					t.Errorf("%q: exit %d, want no FAIL:\n%s", c.line, code, p.out)
				}
			case strings.HasPrefix(c.line, "go run ./cmd/abi-engine run --nats"):
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != exitServing {
					t.Errorf("%q: exit %d, want 3:\n%s", c.line, code, p.out)
				}
				says(t, c, p.out.String(), "another engine already serves this NATS account: ")
				says(t, c, p.out.String(), "Stop it first, or deploy with a new")
			case strings.Contains(c.line, "abi-engine run --nats") && strings.HasSuffix(c.line, "&"):
				known++
				p := r.start(c)
				st := p.state(t)
				switch {
				case strings.HasPrefix(c.says, "serves"):
					if st != "serving" {
						t.Errorf("%q: state %s, the README says it serves", c.line, st)
					}
				case strings.Contains(c.says, "standby"), strings.HasPrefix(c.says, "stands by"):
					if st != "standby" {
						t.Errorf("%q: state %s, the README says it stands by", c.line, st)
					}
				default:
					t.Errorf("README: %q says neither serves nor stands by: %q", c.line, c.says)
				}
			case strings.HasPrefix(c.line, "kill -TERM %"):
				known++
				n, err := strconv.Atoi(strings.TrimPrefix(words[2], "%"))
				if err != nil || n < 1 || n > len(r.jobs) {
					t.Fatalf("%q: no job %s in its block", c.line, words[2])
				}
				old := r.jobs[n-1]
				if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if code := old.wait(t, time.Minute); code != 0 || !strings.Contains(c.says, "exits 0") {
					t.Errorf("%q: exit %d; the README says %q:\n%s", c.line, code, c.says, old.out)
				}
				if !strings.Contains(c.says, "v2 takes over") || len(r.jobs) < 2 {
					t.Fatalf("README: %q no longer says which engine takes over: %q", c.line, c.says)
				}
				next := r.jobs[1]
				testwait.For(t, 30*time.Second, "v2 serves after v1 handed over", func() bool {
					return statusState("http://"+next.http) == "serving"
				})
			case strings.Contains(c.line, "abi-engine doctor --nats"):
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 {
					t.Errorf("%q: exit %d:\n%s", c.line, code, p.out)
				}
				compareDoctor(t, c, p.out.String())
			case strings.Contains(c.line, "status --watch") && strings.HasSuffix(c.line, "&"):
				known++
				r.start(c)
			case strings.Contains(c.line, "step-down --to"):
				known++
				p := r.start(c)
				if code := p.wait(t, time.Minute); code != 0 {
					t.Errorf("%q: exit %d:\n%s", c.line, code, p.out)
				}
				to := words[len(words)-3] // step-down --to ROLLOUT --nats URL
				says(t, c, p.out.String(), "is handing over to rollout "+to)
				says(t, c, p.out.String(), "handed over: ")
				says(t, c, p.out.String(), "rollout "+to+", since ")
				says(t, c, p.out.String(), "holds the lease (revision ")
				watch := r.jobs[len(r.jobs)-1]
				testwait.For(t, 30*time.Second, "status --watch shows the handover to "+to, func() bool {
					return strings.Contains(watch.out.String(), "rollout "+to)
				})
			default:
				t.Errorf("README tour: this test does not know %q (section %s): teach it what the command must do", c.line, c.section)
			}
		}
	}
	if known < 10 {
		t.Errorf("ran %d commands of the README's tour, want every one", known)
	}
	if t.Failed() {
		for i, j := range r.jobs {
			t.Logf("job %%%d %s:\n%s", i+1, j.cmd, j.out)
		}
	}
}

// compareDoctor checks doctor's verdicts against the README's sample: each check the
// README shows has its verdict, and each fix it shows is the fix printed.
func compareDoctor(t *testing.T, c tourCommand, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(c.says), "\n")
	checked := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || (f[0] != "OK" && f[0] != "WARN" && f[0] != "FAIL") {
			continue
		}
		check := f[1]
		if f[1] == "lease" || f[1] == "ping" {
			check = f[1] + " " + f[2]
		}
		got := doctorLine(out, check)
		if !strings.HasPrefix(got, f[0]+" ") {
			t.Errorf("doctor: the README says %q, doctor printed %q:\n%s", l, got, out)
		}
		checked++
	}
	if checked < 2 {
		t.Errorf("README: doctor's sample shows %d verdicts: %q", checked, c.says)
	}
	for _, l := range lines {
		if fix, ok := strings.CutPrefix(l, "fix: "); ok {
			// The README's lease is the default 20 s; the test's is 4 s: compare the words.
			shape := regexp.MustCompile(`"[0-9]+s"|[0-9]+s`).ReplaceAllString(fix, "N")
			printed := regexp.MustCompile(`"[0-9]+s"|[0-9]+s`).ReplaceAllString(out, "N")
			if !strings.Contains(printed, shape) {
				t.Errorf("doctor: the README's fix %q is not what doctor prints:\n%s", fix, out)
			}
		}
	}
	if m := regexp.MustCompile(`(\d+) OK, (\d+) WARN, (\d+) FAIL`).FindStringSubmatch(c.says); m != nil {
		if !strings.Contains(out, "\n"+m[0]+"\n") {
			t.Errorf("doctor: the README's summary says %q, doctor printed:\n%s", m[0], out)
		}
	} else {
		t.Errorf("README: doctor's sample has no summary line: %q", c.says)
	}
}
