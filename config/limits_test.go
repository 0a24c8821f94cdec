package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileLimits: what --config names must be a regular file of at most MaxFileSize
// bytes; anything else is refused before it is read whole (or, for a named pipe, opened),
// with an error naming the path and what is wrong.
func TestFileLimits(t *testing.T) {
	dir := t.TempDir()
	sized := func(name string, n int) string {
		p := filepath.Join(dir, name)
		// A comment line: valid YAML of the size wanted.
		if err := os.WriteFile(p, []byte("#"+strings.Repeat("x", n-2)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		path    string
		wantErr error    // nil: loads
		says    []string // parts of the message
	}{
		{"at the cap", sized("cap.yaml", MaxFileSize), nil, nil},
		{"above the cap", sized("big.yaml", MaxFileSize+1), ErrTooLarge,
			[]string{"big.yaml", fmt.Sprintf("%d bytes", MaxFileSize+1), fmt.Sprintf("cap of %d bytes", MaxFileSize)}},
		{"a directory", dir, ErrNotRegular, []string{dir, "a directory"}},
		{"a character device", "/dev/zero", ErrNotRegular, []string{"/dev/zero", "a character device"}},
		{"a named pipe", mkfifo(t, filepath.Join(dir, "pipe.yaml")), ErrNotRegular, []string{"pipe.yaml", "named pipe"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Skipf("%s: %v", tc.path, err)
			}
			_, err := Load(tc.path, nil)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Load(%s) = %v", tc.path, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Load(%s) = %v, want %v", tc.path, err, tc.wantErr)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not say %q", err, s)
				}
			}
		})
	}
	t.Run("abi-engine.yaml in the working directory is held to the same", func(t *testing.T) {
		wd := t.TempDir()
		mkfifo(t, filepath.Join(wd, FileName))
		t.Chdir(wd)
		if _, err := Load("", nil); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), FileName) {
			t.Fatalf("a named pipe %s: %v", FileName, err)
		}
	})
}

// TestDocumentLimits: a document of thousands of problems gives a bounded message
// listing the first ones and counting the rest, and a long value is cut in messages.
func TestDocumentLimits(t *testing.T) {
	many := func(n int, line func(i int) string) string {
		var b strings.Builder
		b.WriteString("nats:\n")
		for i := range n {
			b.WriteString("  " + line(i) + "\n")
		}
		return b.String()
	}
	huge := strings.Repeat("v", 500_000)
	cases := []struct {
		name     string
		doc      string
		env      map[string]string
		issues   int    // issues listed
		says     string // a part of the message
		maxBytes int    // of the whole message
	}{
		{"40 000 unknown keys", many(40_000, func(i int) string { return fmt.Sprintf("k%d: 1", i) }), nil,
			maxListed + 1, "39980 more problems not listed here (the first 20 are)", 5000},
		{"one key set 40 000 times", many(40_000, func(int) string { return "url: nats://a" }), nil,
			maxListed + 1, "39979 more problems not listed here", 5000},
		{"unknown keys next to a bad value", "log: {level: loud}\n" + many(100, func(i int) string { return fmt.Sprintf("k%d: 1", i) }), nil,
			maxListed + 2, "log.level", 5000},
		{"a long value in the file", "nats:\n  engine:\n    rollout_id: " + huge + "\n", nil,
			1, `nats.engine.rollout_id = "vvvv`, 1000},
		{"a long value in the environment", "", map[string]string{EnvRolloutID: huge},
			1, "500002 bytes, cut", 1000},
		{"a long URL in the environment", "", map[string]string{EnvNATSURL: "http://x" + huge},
			1, "bytes, cut", 2000},
		{"a long unknown key", "nats:\n  ? " + huge + "\n  : 1\n", nil,
			1, "vvv…", 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), envOf(tc.env))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %v, want *Error", err)
			}
			msg := err.Error()
			if len(cerr.Issues) != tc.issues {
				t.Errorf("%d issues, want %d", len(cerr.Issues), tc.issues)
			}
			if !strings.Contains(msg, tc.says) {
				t.Errorf("message does not say %q: %.2000s", tc.says, msg)
			}
			if len(msg) > tc.maxBytes {
				t.Errorf("message of %d bytes, want at most %d: %.2000s", len(msg), tc.maxBytes, msg)
			}
		})
	}
}

// TestMessagesHideSecrets: a password or token in nats.url or in a connection string
// is not in any message, wherever the value came from.
func TestMessagesHideSecrets(t *testing.T) {
	const secret = "Secret-123"
	cases := []struct {
		name string
		doc  string
		env  map[string]string
	}{
		{"a bad port", "nats: {url: \"nats://abi:" + secret + "@host:99999\"}\n", nil},
		{"a bad scheme", "nats: {url: \"http://abi:" + secret + "@host\"}\n", nil},
		{"a token in a list", "nats: {url: \"nats://" + secret + "@a:1,,\"}\n", nil},
		{"from the environment", "", map[string]string{EnvNATSURL: "nats://abi:" + secret + "@host:0"}},
		{"a DSN for another adapter", "services:\n  keyvalue: {adapter: memory, dsn: \"postgres://abi:" + secret + "@db/abi\"}\n", nil},
		{"a key=value DSN for another adapter", "services:\n  keyvalue: {adapter: memory, dsn: \"host=db password=" + secret + "\"}\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), envOf(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, "xxxxx") {
				t.Errorf("message %q shows the secret, or no mask", msg)
			}
		})
	}
}
