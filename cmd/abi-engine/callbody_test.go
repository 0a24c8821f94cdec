package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
)

// runBinary runs the built binary with args and stdin, and returns its exit code and
// outputs.
func runBinary(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("abi-engine %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errOut.String()
}

// TestProcessCallBodyFromStdinAndFile: a 200 KB body, more than one argument may hold,
// is sent from standard input (-) and from a file (@FILE), and reads back whole; a value
// that is not base64 is refused naming its member, before anything is sent.
func TestProcessCallBodyFromStdinAndFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	e := startEngine(t, sharedEngineConfig(srv.URL()))
	e.waitReady(t)

	value := make([]byte, 150_000)
	if _, err := rand.Read(value); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"key": "big", "value": value})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) < 200_000 {
		t.Fatalf("the body is %d bytes, want 200 KB", len(body))
	}
	get := func(key string) []byte {
		t.Helper()
		code, out, errOut := runBinary(t, nil, "call", "keyvalue", "get", `{"key":"`+key+`"}`, "--nats", srv.URL())
		var reply struct {
			Found bool   `json:"found"`
			Value []byte `json:"value"`
		}
		if err := json.Unmarshal([]byte(out), &reply); code != 0 || err != nil || !reply.Found {
			t.Fatalf("call keyvalue get %s: exit %d (%v)\n%s", key, code, err, errOut)
		}
		return reply.Value
	}

	if code, _, errOut := runBinary(t, body, "call", "keyvalue", "set", "-", "--nats", srv.URL()); code != 0 {
		t.Fatalf("call keyvalue set - with a %d-byte body on stdin: exit %d\n%s", len(body), code, errOut)
	}
	if got := get("big"); !bytes.Equal(got, value) {
		t.Fatalf("the value set from stdin reads back as %d bytes, want the %d sent", len(got), len(value))
	}

	file := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(file, bytes.Replace(body, []byte(`"big"`), []byte(`"from-file"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runBinary(t, nil, "call", "keyvalue", "set", "@"+file, "--nats", srv.URL()); code != 0 {
		t.Fatalf("call keyvalue set @FILE: exit %d\n%s", code, errOut)
	}
	if got := get("from-file"); !bytes.Equal(got, value) {
		t.Fatalf("the value set from a file reads back as %d bytes, want the %d sent", len(got), len(value))
	}

	code, _, errOut := runBinary(t, nil, "call", "keyvalue", "set", `{"key":"k","value":"not base64!"}`, "--nats", srv.URL())
	if code != exitUsage || !strings.Contains(errOut, `member "value" is not a valid base64 string`) || !strings.Contains(errOut, "nothing was sent") {
		t.Fatalf("a value that is not base64: exit %d, want 2 naming the member:\n%s", code, errOut)
	}
	code, _, errOut = runBinary(t, nil, "call", "keyvalue", "set", "@"+filepath.Join(t.TempDir(), "none.json"), "--nats", srv.URL())
	if code != exitUsage || !strings.Contains(errOut, "the body file: open ") {
		t.Fatalf("a body file that does not exist: exit %d, want 2 naming it:\n%s", code, errOut)
	}
}

// TestProcessVersionFlagCompletionAndManPages: --version prints what version prints,
// completion writes cobra's scripts, and the hidden man command writes a page per
// command from the same tree.
func TestProcessVersionFlagCompletionAndManPages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, want, _ := runBinary(t, nil, "version")
	if code, got, errOut := runBinary(t, nil, "--version"); code != 0 || got != want || !strings.Contains(got, testVersion) {
		t.Errorf("abi-engine --version: exit %d, %q (%s), want %q", code, got, errOut, want)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runBinary(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, "abi-engine") || len(out) < 1000 {
			t.Errorf("abi-engine completion %s: exit %d, %d bytes\n%s", shell, code, len(out), errOut)
		}
	}
	dir := filepath.Join(t.TempDir(), "man1")
	if code, _, errOut := runBinary(t, nil, "man", dir); code != 0 {
		t.Fatalf("abi-engine man: exit %d\n%s", code, errOut)
	}
	for page, wants := range map[string][]string{
		"abi-engine.1":        {".TH \"ABI-ENGINE\" \"1\"", "abi-engine-status(1)"},
		"abi-engine-status.1": {"--watch", "--json"},
		"abi-engine-call.1":   {"@FILE"},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("man page %s: %v", page, err)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(string(raw), w) {
				t.Errorf("man page %s lacks %q", page, w)
			}
		}
	}
}

// TestCallNamesABadBase64Member: a bytes member that is not base64 is refused naming
// the member before any broker is reached (none runs here); other members are the
// engine's to judge.
func TestCallNamesABadBase64Member(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct{ body, member string }{
		{`{"key":"k","value":"!!"}`, "value"},
		{`{"prefix":"p","key":"k","content":"%%%"}`, "content"},
		{`{"id":"i","sequence":0,"data":"YQ"}`, "data"},
	} {
		r := runCLI(t, nil, "call", "keyvalue", "set", tc.body, "--nats", "nats://127.0.0.1:1")
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, `member "`+tc.member+`" is not a valid base64 string`, "nothing was sent")
	}
	r := runCLI(t, nil, "call", "keyvalue", "set", "-", "--nats", "nats://127.0.0.1:1")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "the body on standard input: there is no standard input")
}
