package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builtBinary is the abi-engine binary the process tests run, built once per test
// binary into a directory TestMain removes.
var builtBinary struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// testVersion is the version the process tests build in with -ldflags.
const testVersion = "v9.9.9-processtest"

// buildBinary builds ./cmd/abi-engine with go build, as the Dockerfile does.
func buildBinary(t *testing.T) string {
	t.Helper()
	b := &builtBinary
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "abi-engine-bin-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "abi-engine")
		args := []string{"build", "-ldflags", "-X main.version=" + testVersion, "-o", b.path}
		env := os.Environ()
		if raceBuild {
			args = append(args, "-race")
		} else {
			env = append(env, "CGO_ENABLED=0") // as the Dockerfile builds it
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Env = env
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.path
}

func removeBuiltBinary() {
	if builtBinary.dir != "" {
		_ = os.RemoveAll(builtBinary.dir)
	}
}
