package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/abi-engine/engine/config"
	"go.yaml.in/yaml/v3"
)

// The subset of the Kubernetes objects that docs/operations.md makes promises about.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       any `yaml:"maxSurge"`
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
				Containers                    []container `yaml:"containers"`
				Volumes                       []struct {
					Name      string `yaml:"name"`
					ConfigMap struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name       string   `yaml:"name"`
	Image      string   `yaml:"image"`
	Args       []string `yaml:"args"`
	WorkingDir string   `yaml:"workingDir"`
	Env        []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

const manifestPath = "../../deploy/kubernetes/deployment.yaml"

func readManifest(t *testing.T) (deploy, configMap k8sObject) {
	t.Helper()
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var deploys, configMaps []k8sObject
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", manifestPath, err)
		}
		switch o.Kind {
		case "Deployment":
			deploys = append(deploys, o)
		case "ConfigMap":
			configMaps = append(configMaps, o)
		default:
			t.Errorf("%s: unexpected object kind %q", manifestPath, o.Kind)
		}
	}
	if len(deploys) != 1 || len(configMaps) != 1 {
		t.Fatalf("%s holds %d Deployments and %d ConfigMaps, want one of each", manifestPath, len(deploys), len(configMaps))
	}
	return deploys[0], configMaps[0]
}

func TestDeploymentManifest(t *testing.T) {
	d, cm := readManifest(t)
	if d.APIVersion != "apps/v1" || cm.APIVersion != "v1" {
		t.Errorf("apiVersions %q and %q, want apps/v1 and v1", d.APIVersion, cm.APIVersion)
	}
	spec := d.Spec
	if spec.Replicas == nil || *spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1: one engine serves an account", spec.Replicas)
	}
	if spec.Strategy.Type != "RollingUpdate" {
		t.Errorf("strategy %q, want RollingUpdate", spec.Strategy.Type)
	}
	if ru := spec.Strategy.RollingUpdate; ru.MaxSurge != 1 || ru.MaxUnavailable != 0 {
		t.Errorf("maxSurge %v, maxUnavailable %v; want 1 and 0", ru.MaxSurge, ru.MaxUnavailable)
	}
	labels := spec.Template.Metadata.Labels
	for k, v := range spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, labels)
		}
	}
	pod := spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The configuration: mounted from the ConfigMap, given with --config.
	const key = config.FileName
	data, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Metadata.Name, key)
	}
	var volume string
	for _, v := range pod.Volumes {
		if v.ConfigMap.Name == cm.Metadata.Name {
			volume = v.Name
		}
	}
	var mounted string
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			mounted = path.Join(m.MountPath, key)
		}
	}
	if volume == "" || mounted == "" {
		t.Errorf("the ConfigMap %s is not mounted in the container", cm.Metadata.Name)
	}
	if !slicesEqual(c.Args, []string{"--config", mounted}) {
		t.Errorf("container args %q, want --config %s (the image's entrypoint is abi-engine run)", c.Args, mounted)
	}
	if path.Join(c.WorkingDir, key) != mounted {
		t.Errorf("workingDir %q: the docs promise that status and call in the pod find %s there", c.WorkingDir, mounted)
	}

	// The rollout id: per deploy, from the label that carries the image tag.
	var rolloutRef string
	for _, e := range c.Env {
		if e.Name == config.EnvRolloutID {
			rolloutRef = e.ValueFrom.FieldRef.FieldPath
		}
	}
	m := regexp.MustCompile(`^metadata\.labels\['([^']+)'\]$`).FindStringSubmatch(rolloutRef)
	if m == nil {
		t.Fatalf("env %s comes from %q, want a pod label (metadata.labels['...'])", config.EnvRolloutID, rolloutRef)
	}
	rollout := labels[m[1]]
	_, tag, _ := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":")
	if rollout == "" || rollout != tag {
		t.Errorf("the rollout id label %s=%q and the image tag %q differ: the docs say the rollout id is the image tag", m[1], rollout, tag)
	}

	// The embedded configuration passes the shared-backend check for that rollout.
	cfg, err := config.Parse([]byte(data), envOf(map[string]string{config.EnvRolloutID: rollout}))
	if err != nil {
		t.Fatalf("the ConfigMap's %s with %s=%s: %v", key, config.EnvRolloutID, rollout, err)
	}
	if cfg.NATS.Engine.RolloutID != rollout || cfg.NATS.Engine.Role != config.RoleServe {
		t.Errorf("rollout %q, role %q; want %q and serve", cfg.NATS.Engine.RolloutID, cfg.NATS.Engine.Role, rollout)
	}
	if err := cfg.CheckSharedBackends(); err != nil || len(cfg.LocalBackends()) != 0 {
		t.Errorf("the deploy's configuration keeps data on the host: %v %v", err, cfg.LocalBackends())
	}
	if cfg.NATS.EmbeddedBroker() || cfg.NATS.Engine.LeaseReplicas != 3 {
		t.Errorf("nats.url %q, lease_replicas %d; want a NATS service and 3 replicas of the lease", cfg.NATS.URL, cfg.NATS.Engine.LeaseReplicas)
	}
	if cfg.Services.KeyValue.Adapter != config.KeyValuePostgres || cfg.Services.ObjectStorage.Adapter != config.ObjectStorageJetStream {
		t.Errorf("adapters %s and %s, want postgres and jetstream", cfg.Services.KeyValue.Adapter, cfg.Services.ObjectStorage.Adapter)
	}

	// The memory limit holds the sessions' budget, the runtime's headroom and the idle
	// engine (docs/operations.md "Sizing memory"), and is not far above it: the engine's
	// bounds, not the pod's limit, are what stop a client filling it.
	limit, ok := mebibytes(c.Resources.Limits["memory"])
	if !ok {
		t.Errorf("memory limit %q, want one in Mi", c.Resources.Limits["memory"])
	}
	if need := cfg.Limits.RuntimeMemoryLimit()>>20 + idleMiB; limit < need || limit > 2*need {
		t.Errorf("memory limit %d Mi; limits.memory_mib %d + %d MiB headroom + %d MiB idle = %d Mi: want from that to twice that",
			limit, cfg.Limits.MemoryMiB, config.RuntimeHeadroomMiB, idleMiB, need)
	}
	if req, ok := mebibytes(c.Resources.Requests["memory"]); !ok || req > limit {
		t.Errorf("memory request %q, want one in Mi, at most the limit", c.Resources.Requests["memory"])
	}

	// The grace period covers drain_seconds.
	drain := cfg.NATS.Engine.DrainSeconds
	if g := pod.TerminationGracePeriodSeconds; g == nil {
		t.Errorf("no terminationGracePeriodSeconds: the default 30 s is below drain_seconds %v", drain)
	} else if float64(*g) <= drain {
		t.Errorf("terminationGracePeriodSeconds %d, want more than drain_seconds %v", *g, drain)
	}

	// The probes reach the engine's HTTP server.
	_, portText, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatalf("http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	httpPort, _ := strconv.Atoi(portText)
	if host, _, _ := net.SplitHostPort(cfg.HTTP.Listen); host != "0.0.0.0" && host != "" {
		t.Errorf("http.listen %q is not reachable by the kubelet's probes", cfg.HTTP.Listen)
	}
	portOf := func(p any) int {
		switch p := p.(type) {
		case int:
			return p
		case string:
			for _, cp := range c.Ports {
				if cp.Name == p {
					return cp.ContainerPort
				}
			}
		}
		return 0
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", pr.name, pr.path)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path || portOf(pr.p.HTTPGet.Port) != httpPort {
			t.Errorf("%s: GET %s on port %v, want %s on %d (http.listen)", pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port, pr.path, httpPort)
		}
	}
}

// idleMiB is what docs/operations.md allows an idle engine: measured 22 to 28 MiB of
// RSS (test/e2e TestOneClientCannotExhaustTheEnginesMemory), rounded up.
const idleMiB = 64

// mebibytes parses a Kubernetes quantity in Mi or Gi.
func mebibytes(q string) (int64, bool) {
	for suffix, mul := range map[string]int64{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * mul, err == nil
		}
	}
	return 0, false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	op, args string
}

func readDockerfile(t *testing.T) []dockerInstruction {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{strings.ToUpper(op), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t)
	var froms []string
	var build, entrypoint, expose, copyBinary string
	env := map[string]string{}
	for _, in := range ins {
		switch in.op {
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "FROM":
			froms = append(froms, in.args)
		case "RUN":
			if strings.Contains(in.args, "go build") {
				build = in.args
			}
		case "ENTRYPOINT":
			entrypoint = in.args
		case "EXPOSE":
			expose = in.args
		case "COPY":
			if strings.HasPrefix(in.args, "--from=") {
				copyBinary = in.args
			}
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:1.26 ") || strings.HasPrefix(froms[1], "golang") {
		t.Errorf("stages %q: want a golang:1.26 build stage and a small runtime stage", froms)
	}
	for _, want := range []string{"CGO_ENABLED=0", "go build", "-X main.version=", "./cmd/abi-engine"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build step %q lacks %q", build, want)
		}
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slicesEqual(ep, []string{"abi-engine", "run"}) {
		t.Errorf("ENTRYPOINT %s (%v), want [\"abi-engine\",\"run\"]", entrypoint, err)
	}
	if !strings.HasSuffix(copyBinary, " /usr/local/bin/abi-engine") {
		t.Errorf("the runtime stage copies %q: want the binary in /usr/local/bin, on the PATH of the ENTRYPOINT", copyBinary)
	}
	if expose != "8080 4222" {
		t.Errorf("EXPOSE %q, want 8080 4222", expose)
	}
	// Run plainly, the container must be reachable: the defaults' 127.0.0.1 is not.
	for k, want := range map[string]string{config.EnvHTTPListen: "0.0.0.0:8080", config.EnvEmbeddedListen: "0.0.0.0:4222"} {
		if env[k] != want {
			t.Errorf("the image sets %s=%q, want %q", k, env[k], want)
		}
	}
}

// TestBuildContextLeavesOutLocalState: the quick start's data/ (the embedded broker's
// store) and .git stay out of the image's build context, and data/ out of git.
func TestBuildContextLeavesOutLocalState(t *testing.T) {
	for file, wants := range map[string][]string{
		"../../.dockerignore": {".git", "data/"},
		"../../.gitignore":    {"data/"},
	} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		lines := strings.Split(string(raw), "\n")
		for _, want := range wants {
			if !slices.Contains(lines, want) {
				t.Errorf("%s does not list %s", file, want)
			}
		}
	}
}
