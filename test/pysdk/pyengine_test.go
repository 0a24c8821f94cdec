package pysdk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testproc"
)

// requiredEngine runs the Python engine test: its install (naas-abi-core and its
// dependency tree, some 160 distributions) is too heavy for every run.
const requiredEngine = "ABI_TEST_PYTHON_ENGINE"

// engineVenv returns the interpreter of a virtual environment holding
// pyengine/requirements.txt (the Python engine, naas-abi-core 3.1.0 with its nats and
// qdrant extras, pinned by hash), made once under the user cache directory.
func engineVenv(t *testing.T, py string) string {
	t.Helper()
	req, err := os.ReadFile(filepath.Join("pyengine", "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(req, []byte(py)...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "abi-engine-pyengine", hex.EncodeToString(sum[:8]))
	bin := filepath.Join(dir, "bin", "python")
	if _, err := os.Stat(filepath.Join(dir, "installed")); err == nil {
		return bin
	}
	_ = os.RemoveAll(dir)
	if out, err := exec.Command(py, "-m", "venv", dir).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv %s: %v\n%s", dir, err, out)
	}
	abs, err := filepath.Abs(filepath.Join("pyengine", "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	install := exec.Command(bin, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps", "-r", abs)
	if out, err := install.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("pip install --require-hashes -r pyengine/requirements.txt: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "installed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// pyEngineConfig is the Python engine's config.yaml: NATS mode on the test's broker,
// no modules, the lease of 2 s, discovery for project pysdk, and keyvalue and
// object_storage on the JetStream buckets abi-engine's jetstream adapters use
// (pyengine/abi_jetstream_adapters.py). Every other service keeps its local default,
// which is why this engine runs without a rollout id (a Python engine with one refuses
// local backends).
// Without shared, keyvalue and object_storage keep the Python engine's defaults too.
func pyEngineConfig(natsURL, secret string, shared bool) string {
	adapter := func(class string) string {
		return fmt.Sprintf(`{adapter: custom, python_module: abi_jetstream_adapters, module_callable: %s, custom_config: {nats_url: %q}, shared_storage: true}`, class, natsURL)
	}
	stores := ""
	if shared {
		stores = fmt.Sprintf("  kv: {kv_adapter: %s}\n  object_storage: {object_storage_adapter: %s}\n", adapter("JetStreamKeyValue"), adapter("JetStreamObjects"))
	}
	return fmt.Sprintf(`api: {reload: false}
global_config: {ai_mode: cloud, skip_ontology_loading: true}
modules: []
services:
  secret: {secret_adapters: []}
  cache: {cache_adapters: []}
%snats:
  nats_url: %q
  jwt_secret: %q
  discovery: {project: pysdk, lease_seconds: 5}
  jobs: {enabled: false}
  engine: {lease_seconds: 2, drain_seconds: 5}
`, stores, natsURL, secret)
}

// TestHandoverFromThePythonEngine is the migration of a Python deployment: the Python
// engine (naas-abi-core 3.1.0 from PyPI) serves, abi-engine starts with a rollout id
// and stands by behind it, three SDK clients and a module run through the Python
// engine, and the Python engine gets SIGTERM: abi-engine serves, no SDK call failed,
// every write the Python engine acknowledged (keyvalue and objects) reads back through
// abi-engine, and the module stayed READY under the same instance id.
func TestHandoverFromThePythonEngine(t *testing.T) {
	if os.Getenv(requiredEngine) != "1" {
		t.Skipf("the Python engine test runs with %s=1: it installs naas-abi-core and its ~160 dependencies (spacy, langgraph, pandas, duckdb …)", requiredEngine)
	}
	sysPy := python(t)
	sdkPy := venv(t, sysPy)
	enginePy := engineVenv(t, sysPy)
	dir := t.TempDir()
	bin := buildEngine(t, dir)
	srv := natstest.Start(t)

	secret := "pysdk-pyengine-secret-0123456789abcdef"
	secretFile := secretFileIn(t, dir, []byte(secret))
	token := tokenFor(t, []byte(secret), "sdk-migration", time.Hour)

	pyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pyDir, "config.yaml"), []byte(pyEngineConfig(srv.URL(), secret, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	adapters, err := filepath.Abs("pyengine")
	if err != nil {
		t.Fatal(err)
	}
	pyEngine := startProc(t, "python engine", pyDir, []string{"PYTHONPATH=" + adapters, "PYTHONDONTWRITEBYTECODE=1"},
		enginePy, filepath.Join(adapters, "serve.py"), "config.yaml")
	booting := time.Now()
	pyEngine.waitOutput("loaded ", 180*time.Second)
	_, version, _ := strings.Cut(pyEngine.out.String(), "naas-abi-core ")
	version, _, _ = strings.Cut("naas-abi-core "+version, "\n")
	t.Logf("the Python engine (%s) loaded in %s", version, time.Since(booting).Round(time.Millisecond))

	// Before the migration, abi-engine's doctor with the configuration abi-engine will
	// run: the lease bucket the Python engine made is one abi-engine can use.
	port := testproc.FreePort(t)
	goConfig := deployConfig(srv.URL(), secretFile, port)
	doctorFile := filepath.Join(dir, "doctor.yaml")
	if err := os.WriteFile(doctorFile, []byte(goConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	doctor := exec.Command(bin, "doctor", "--config", doctorFile)
	doctor.Dir = dir
	report, err := doctor.CombinedOutput()
	t.Logf("--- abi-engine doctor while the Python engine serves:\n%s", report)
	if err != nil {
		t.Fatalf("abi-engine doctor: %v", err)
	}
	if !strings.Contains(string(report), fmt.Sprintf("%-5s %-21s", "OK", "lease bucket")) {
		t.Fatalf("abi-engine doctor did not find the lease bucket OK")
	}

	// abi-engine stands by behind the Python holder (it has a rollout id, the Python
	// engine none) and opens the JetStream buckets the Python engine's adapters bind to.
	goEngine := startEngine(t, bin, "abi-engine", "abi-1", goConfig, port)
	goEngine.waitState("standby", 60*time.Second)

	// The Python engine's discovery lets a module register only with a token whose
	// caller is its module id.
	modToken, err := servicetoken.Mint([]byte(secret), "migration.alpha", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mod := startModule(t, sdkPy, srv.URL(), modToken, "migration.alpha", testproc.FreePort(t))
	mod.waitReady(60 * time.Second)
	before := listModules(t, bin, srv.URL(), secretFile)[mod.id]
	if len(before) != 1 || before[0].Status != "READY" {
		t.Fatalf("abi-engine modules (answered by the Python engine): %s is %+v, want one READY instance", mod.id, before)
	}
	watch := watchReady(mod)
	tf := startTraffic(t, sdkPy, srv.URL(), token, dir, 3)
	tf.waitProgress(20, 60*time.Second)
	throughPython := tf.ackedCount() // abi-engine stands by: these went through the Python engine

	pyEngine.signal(syscall.SIGTERM)
	if code := pyEngine.exitCode(60 * time.Second); code != 0 {
		t.Fatalf("the Python engine exited %d after SIGTERM, want 0", code)
	}
	goEngine.waitState("serving", 30*time.Second)
	waitRenewed(t, bin, srv.URL(), secretFile, []*moduleProc{mod}, 30*time.Second)
	tf.waitProgress(6, 30*time.Second)
	calls := tf.halt()
	watch.halt()

	if len(watch.failed) > 0 {
		t.Errorf("the module's /ready was not READY at %d of %d polls, first: %s", len(watch.failed), watch.polls, watch.failed[0])
	}
	after := listModules(t, bin, srv.URL(), secretFile)[mod.id]
	if len(after) != 1 || after[0].InstanceID != before[0].InstanceID || after[0].Status != "READY" {
		t.Errorf("abi-engine modules after the handover: %s is %+v, want READY instance %s as before", mod.id, after, before[0].InstanceID)
	}
	read, acked := tf.verify()
	t.Logf("Python engine → abi-engine under 3 SDK clients and a module: %d calls; %d acknowledged writes (%d by the Python engine) read back through abi-engine; /ready polled %d times",
		calls, acked, throughPython, watch.polls)
	if read != acked {
		t.Fatalf("read back %d of %d acknowledged writes", read, acked)
	}
	mod.signal(syscall.SIGTERM)
	if code := mod.exitCode(30 * time.Second); code != 0 {
		t.Errorf("%s exited %d after SIGTERM, want 0", mod.name, code)
	}
}
