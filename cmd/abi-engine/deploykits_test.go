package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

const (
	chartDir    = "../../deploy/helm/abi-engine/"
	alertsPath  = chartDir + "files/alerts.yaml"
	composeDir  = "../../deploy/compose/"
	operationsM = "../../docs/operations.md"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var metricName = regexp.MustCompile(`\babi_engine_[a-z_]*[a-z]`)

// TestAlertRulesCoverTheMetricsTable: the chart's alert rules query only metrics the
// engine registers, and every metric docs/operations.md says to alert on has a rule
// (but those whose threshold only the operator knows, listed here).
func TestAlertRulesCoverTheMetricsTable(t *testing.T) {
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	queried := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert name, an expression, a severity and a summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			for _, n := range metricName.FindAllString(r.Expr, -1) {
				queried[strings.TrimSuffix(n, "_bucket")] = true
			}
		}
	}
	eng, err := newEngine(config.Default(), zap.NewNop(), "v0.0.0-test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := eng.Registry()
	for name := range queried {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "rules probe"})
		if err := reg.Register(probe); err == nil {
			reg.Unregister(probe)
			t.Errorf("%s queries %s, which the engine does not register", alertsPath, name)
		}
	}

	doc, err := os.ReadFile(operationsM)
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "| metric | alert when |")
	table, _, _ = strings.Cut(table, "\n\n")
	notAlerted := []string{
		"abi_engine_handover_phase_seconds", // near drain_seconds: the operator's setting
		"abi_engine_open_sessions",          // "grows without bound": no fixed threshold
		"abi_engine_load_seconds",           // informational
		"abi_engine_build_info",             // informational
	}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `abi_engine_") {
			continue
		}
		name := metricName.FindString(line)
		if !queried[name] && !slices.Contains(notAlerted, name) {
			t.Errorf("docs/operations.md says when to alert on %s, but no rule of %s queries it", name, alertsPath)
		}
	}
}

// TestHelmChartRolloutSettings: the chart's Deployment has the rollout settings
// docs/operations.md prescribes, and its default termination grace is the manifest's.
func TestHelmChartRolloutSettings(t *testing.T) {
	tpl, err := os.ReadFile(chartDir + "templates/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"replicas: 1",
		"maxSurge: 1",
		"maxUnavailable: 0",
		"terminationGracePeriodSeconds: {{ add .Values.jobsSeconds .Values.config.nats.engine.drain_seconds .Values.terminationMarginSeconds }}",
		"fieldPath: metadata.labels['abi-engine/rollout']",
		"path: /readyz",
		"path: /healthz",
	} {
		if !strings.Contains(string(tpl), want) {
			t.Errorf("the chart's Deployment lacks %q", want)
		}
	}
	var values struct {
		JobsSeconds   int `yaml:"jobsSeconds"`
		MarginSeconds int `yaml:"terminationMarginSeconds"`
		Config        struct {
			NATS struct {
				Engine struct {
					DrainSeconds int `yaml:"drain_seconds"`
				} `yaml:"engine"`
			} `yaml:"nats"`
		} `yaml:"config"`
	}
	raw, err := os.ReadFile(chartDir + "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	deploy, _ := readManifest(t)
	grace := values.JobsSeconds + values.Config.NATS.Engine.DrainSeconds + values.MarginSeconds
	if want := *deploy.Spec.Template.Spec.TerminationGracePeriodSeconds; grace != want || values.Config.NATS.Engine.DrainSeconds == 0 {
		t.Errorf("the chart's default termination grace is %d s, want the manifest's %d", grace, want)
	}
	for _, f := range []string{"templates/servicemonitor.yaml", "templates/prometheusrule.yaml"} {
		raw, err := os.ReadFile(chartDir + f)
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(raw), "monitoring.coreos.com/v1") {
			t.Errorf("%s is not a Prometheus Operator object", f)
		}
	}
}

// TestComposeQuickStart: the compose quick start runs a NATS server with JetStream and
// two engines whose configuration passes config check as a hot standby of a rollout,
// stopped with a grace above their drain; its rolling-deploy script is executable.
func TestComposeQuickStart(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image           string            `yaml:"image"`
			Command         []string          `yaml:"command"`
			Environment     map[string]string `yaml:"environment"`
			StopGracePeriod string            `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	raw, err := os.ReadFile(composeDir + "compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if nats := c.Services["nats"]; !strings.HasPrefix(nats.Image, "nats:") || !slices.Contains(nats.Command, "--jetstream") {
		t.Errorf("compose service nats %+v: want a NATS server with JetStream", nats)
	}
	cfg, err := config.Load(composeDir+"abi-engine.yaml", func(k string) string {
		return map[string]string{config.EnvRolloutID: "v1", config.EnvStandby: "hot"}[k]
	})
	if err != nil {
		t.Fatalf("the quick start's configuration as a hot standby of rollout v1: %v", err)
	}
	for _, name := range []string{"engine-a", "engine-b"} {
		s, ok := c.Services[name]
		grace, err := time.ParseDuration(s.StopGracePeriod)
		switch {
		case !ok:
			t.Errorf("no compose service %s", name)
		case !strings.Contains(s.Environment["ABI_ROLLOUT_ID"], "ABI_ROLLOUT_ID") || s.Environment["ABI_ENGINE_STANDBY"] != "hot":
			t.Errorf("%s environment %v: want the rollout id from ABI_ROLLOUT_ID and a hot standby", name, s.Environment)
		case err != nil || grace <= cfg.NATS.Engine.Drain():
			t.Errorf("%s stop_grace_period %q (%v): want more than drain_seconds (%s)", name, s.StopGracePeriod, err, cfg.NATS.Engine.Drain())
		}
	}
	if fi, err := os.Stat(composeDir + "rolling-deploy.sh"); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("rolling-deploy.sh (%v): want an executable script", err)
	}
}

// TestHelmTemplateRendersTheSettings renders the chart with helm, where it is
// installed (CI installs it for its deploy step): the Deployment has the rollout
// settings and the grace from the drain, its rollout id label is a valid rollout id,
// and the ConfigMap's abi-engine.yaml passes the configuration's validation as that
// rollout.
func TestHelmTemplateRendersTheSettings(t *testing.T) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("helm is not installed")
	}
	out, err := exec.Command(helm, "template", "abi-engine", chartDir,
		"--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	kinds := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		kinds[o.Kind] = o
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service", "ServiceMonitor", "PrometheusRule"} {
		if _, ok := kinds[k]; !ok {
			t.Errorf("helm template renders no %s", k)
		}
	}
	d := kinds["Deployment"]
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || ru.MaxSurge != 1 || ru.MaxUnavailable != 0 ||
		d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil || *d.Spec.Template.Spec.TerminationGracePeriodSeconds != 120 {
		t.Errorf("the rendered Deployment: replicas %v, maxSurge %v, maxUnavailable %v, grace %v; want 1, 1, 0, 120",
			d.Spec.Replicas, ru.MaxSurge, ru.MaxUnavailable, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	}
	rollout := d.Spec.Template.Metadata.Labels["abi-engine/rollout"]
	_, err = config.Parse([]byte(kinds["ConfigMap"].Data["abi-engine.yaml"]), func(k string) string {
		return map[string]string{config.EnvRolloutID: rollout}[k]
	})
	if rollout == "" || err != nil {
		t.Errorf("the rendered configuration as rollout %q: %v", rollout, err)
	}
}
