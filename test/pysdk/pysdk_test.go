package pysdk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/primaries/keyvalue/bbolt"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	discoveryv1 "github.com/abi-engine/engine/proto/abi/discovery/v1"
	keyvaluev1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	objectstoragev1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
)

// required turns a skip into a failure (CI sets it).
const required = "ABI_TEST_PYTHON_SDK"

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(required) == "1" {
		t.Fatalf("the Python SDK suite cannot run (%s=1): %s", required, msg)
	}
	t.Skipf("the Python SDK suite does not run: %s (set %s=1 to make this a failure)", msg, required)
}

// python finds an interpreter of 3.10 or later.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("ABI_TEST_PYTHON")
	if py == "" {
		py = "python3"
	}
	path, err := exec.LookPath(py)
	if err != nil {
		unavailable(t, "no %s on PATH", py)
	}
	out, err := exec.Command(path, "-c", "import sys; print(sys.version_info >= (3, 10), sys.version.split()[0])").Output()
	if err != nil {
		unavailable(t, "%s does not run: %v", path, err)
	}
	ok, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if ok != "True" {
		unavailable(t, "%s is Python %s; the SDK needs 3.10 or later", path, version)
	}
	return path
}

// venv returns the interpreter of a virtual environment holding requirements.txt,
// made on first use under the user cache directory and reused while the
// requirements stay the same.
func venv(t *testing.T, py string) string {
	t.Helper()
	req, err := os.ReadFile("requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(req, []byte(py)...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "abi-engine-pysdk", hex.EncodeToString(sum[:8]))
	bin := filepath.Join(dir, "bin", "python")
	if _, err := os.Stat(filepath.Join(dir, "installed")); err == nil {
		return bin
	}
	_ = os.RemoveAll(dir)
	if out, err := exec.Command(py, "-m", "venv", dir).CombinedOutput(); err != nil {
		unavailable(t, "python -m venv %s: %v\n%s", dir, err, out)
	}
	abs, err := filepath.Abs("requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	install := exec.Command(bin, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes", "-r", abs)
	if out, err := install.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		unavailable(t, "pip install --require-hashes -r requirements.txt: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "installed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildEngine builds the abi-engine binary into dir.
func buildEngine(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "abi-engine")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.Command("go", "build", "-o", bin, "github.com/abi-engine/engine/cmd/abi-engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build abi-engine: %v\n%s", err, out)
	}
	return bin
}

// TestPythonSDK runs test_sdk.py with the real client against a real engine.
func TestPythonSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Python SDK suite builds and starts processes")
	}
	py := venv(t, python(t))
	dir := t.TempDir()
	engine := buildEngine(t, dir)
	srv := natstest.Start(t)

	secret := []byte("pysdk-suite-secret-0123456789abcdef")
	secretFile := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testproc.FreePort(t)
	// The key-value file holds, before the engine starts, a value larger than the
	// broker's max payload, which only a parked reply can return: this package's set
	// would need a request upload (abi.rpc.overflow, operation request).
	kvFile := filepath.Join(dir, "kv.db")
	seedBigValue(t, kvFile)
	cfg := fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine: {role: serve, lease_seconds: 2}
  discovery: {project: pysdk, lease_seconds: 5}
services:
  keyvalue: {adapter: bbolt, path: %q}
  object_storage: {adapter: memory}
http: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
`, srv.URL(), secretFile, kvFile, port)
	cfgFile := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var engineOut bytes.Buffer
	cmd := exec.Command(engine, "run", "--config", cfgFile)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &engineOut, &engineOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("--- abi-engine output:\n%s", engineOut.String())
		}
	})
	waitReady(t, port, exited)

	now := time.Now()
	mint := func(secret []byte, sub string, at time.Time) string {
		tok, err := servicetoken.Mint(secret, sub, at, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	descriptors := filepath.Join(dir, "abi-engine.protoset")
	writeDescriptors(t, descriptors)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pytest := exec.CommandContext(ctx, py, pytestArgs("test_sdk.py", "test_discovery.py", "test_modules.py")...)
	pytest.Env = append(os.Environ(),
		"ABI_NATS_URL="+srv.URL(),
		"ABI_TEST_TOKEN="+mint(secret, "sdk-ci", now),
		"ABI_TEST_TOKEN_WRONG_SECRET="+mint([]byte("not the engine's secret, same length"), "sdk-ci", now),
		"ABI_TEST_TOKEN_EXPIRED="+mint(secret, "sdk-ci", now.Add(-2*time.Hour)),
		"ABI_TEST_TOKEN_API="+mint(secret, "api", now),
		"ABI_TEST_TOKEN_OTHER="+mint(secret, "other", now),
		// test_modules.py signs a token that expires while its module runs.
		"ABI_TEST_SECRET_FILE="+secretFile,
		"ABI_TEST_DESCRIPTORS="+descriptors,
		fmt.Sprintf("ABI_TEST_METRICS=http://127.0.0.1:%d/metrics", port),
		"ABI_TEST_BIG_KEY="+bigKey,
		fmt.Sprintf("ABI_TEST_BIG_SIZE=%d", bigSize),
		"PYTHONDONTWRITEBYTECODE=1",
	)
	out, err := pytest.CombinedOutput()
	t.Logf("--- pytest (%s):\n%s", py, out)
	if err != nil {
		t.Fatalf("pytest with the Python SDK failed: %v", err)
	}
}

// pytestFilter names the variable whose value, when set, is passed to pytest as -k: to
// run some of the Python checks while working on them.
const pytestFilter = "ABI_TEST_PYTEST_K"

// pytestArgs are the interpreter's arguments that run pytest on files, verbose, with
// the checks' output, no cache in the work tree, and the -k of pytestFilter.
func pytestArgs(files ...string) []string {
	args := []string{"-m", "pytest", "-v", "-s", "-p", "no:cacheprovider"}
	if k := os.Getenv(pytestFilter); k != "" {
		args = append(args, "-k", k)
	}
	return append(args, files...)
}

// The value seedBigValue stores: bigSize bytes of "0123456789abcdef" repeated, three
// times the broker's default max payload of 1 MiB.
const (
	bigKey  = "pysdk-parked"
	bigSize = 3 << 20
)

// seedBigValue writes the big value into the bbolt file at path.
func seedBigValue(t *testing.T, path string) {
	t.Helper()
	store, err := bbolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Set(context.Background(), bigKey, bytes.Repeat([]byte("0123456789abcdef"), bigSize/16), 0); err != nil {
		t.Fatal(err)
	}
}

// waitReady polls the engine's /readyz: it is another process, whose readiness has no
// event to wait on but its answer.
func waitReady(t *testing.T, port int, exited <-chan error) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("abi-engine exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("abi-engine not ready within 60s (last: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeDescriptors writes the descriptors of the engine's protobuf contracts (and of
// what they import) to path as a FileDescriptorSet, for test_sdk.py to compare with the
// installed naas-abi-proto.
func writeDescriptors(t *testing.T, path string) {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	// Every file of each package, whichever way the package's messages are split
	// across files: file names never reach the wire, so only the messages are compared.
	for _, pkg := range []protoreflect.FullName{
		commonv1.File_abi_common_v1_common_proto.Package(), keyvaluev1.File_abi_keyvalue_v1_keyvalue_proto.Package(),
		objectstoragev1.File_abi_object_storage_v1_object_storage_proto.Package(), transferv1.File_abi_transfer_v1_transfer_proto.Package(),
		discoveryv1.File_abi_discovery_v1_discovery_proto.Package(),
	} {
		protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
			add(fd)
			return true
		})
	}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
