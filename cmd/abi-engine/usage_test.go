package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestUsageErrorsExit2(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{"Usage:", "abi-engine [command]"}},
		{"unknown command", []string{"serve"}, []string{`unknown command "serve"`, "--help"}},
		{"unknown flag", []string{"status", "--bogus"}, []string{"unknown flag: --bogus", "--help"}},
		{"flag without its value", []string{"status", "--nats"}, []string{"flag needs an argument", "--nats"}},
		{"bad duration", []string{"call", "keyvalue", "get", "--timeout", "soon"}, []string{"--timeout", "soon"}},
		{"zero timeout", []string{"call", "keyvalue", "get", "--timeout", "0s"}, []string{"--timeout 0s: must be greater than 0"}},
		{"call without operation", []string{"call", "keyvalue"}, []string{"accepts between 2 and 3 arg(s), received 1"}},
		{"call with too many args", []string{"call", "keyvalue", "get", "{}", "x"}, []string{"received 4"}},
		{"call with bad JSON", []string{"call", "keyvalue", "get", "{key: 1}"}, []string{"JSON argument", "not valid JSON"}},
		{"call with a wildcard", []string{"call", "keyvalue", ">"}, []string{`OPERATION ">"`, "wildcards"}},
		{"call with a dotted service", []string{"call", "key.value", "get"}, []string{`SERVICE "key.value"`, "dot"}},
		{"call with an empty token", []string{"call", "keyvalue", "get."}, []string{"empty token"}},
		{"status with an argument", []string{"status", "now"}, []string{`unknown command "now"`}},
		{"status with a bad URL", []string{"status", "--nats", "http://x:4222"}, []string{"nats.url", "flag --nats"}},
		{"version with an argument", []string{"version", "x"}, []string{`unknown command "x"`}},
		{"config without a command", []string{"config"}, []string{"needs a command: check"}},
		{"config with an unknown command", []string{"config", "lint"}, []string{`unknown command "lint"`}},
		{"run with a bad log format", []string{"run", "--log-format", "xml"}, []string{`--log-format "xml": must be json, console or auto`}},
		{"run with a bad log level", []string{"run", "--log-level", "loud"}, []string{`--log-level "loud"`}},
		{"run with a bad role", []string{"run", "--role", "boss"}, []string{"nats.engine.role", `"boss"`, "flag --role"}},
		{"run with a bad http address", []string{"run", "--http", "8080"}, []string{"http.listen", "flag --http"}},
		{"run with an argument", []string{"run", "now"}, []string{`unknown command "now"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir()) // no abi-engine.yaml
			r := runCLI(t, nil, tc.args...)
			wantCode(t, r, exitUsage)
			wantContains(t, "stderr", r.stderr, tc.want...)
			if r.stdout != "" {
				t.Errorf("a usage error printed on stdout: %q", r.stdout)
			}
		})
	}
}

func TestRunRefusesBadConfigBeforeBuildingAnEngine(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "local.yaml", localConfig)
	// cliFor's engine factory fails the test if called.
	r := runCLI(t, map[string]string{"ABI_ROLLOUT_ID": "v2"}, "run", "--config", path)
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "keyvalue: file at var/kv.db", "object_storage: files under var/objects")

	r = runCLI(t, nil, "run", "--config", dir+"/missing.yaml")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "missing.yaml")
}

func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help", "call"}, {"config", "check", "--help"}} {
		r := runCLI(t, nil, args...)
		wantCode(t, r, exitOK)
		wantContains(t, "stdout", r.stdout, "Usage:")
	}
	r := runCLI(t, nil, "--help")
	wantContains(t, "help", r.stdout, "run", "status", "call", "config", "version", "3 another engine serves")
}

func TestVersion(t *testing.T) {
	r := runCLI(t, nil, "version")
	wantCode(t, r, exitOK)
	want := "abi-engine v0.0.0-test (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if r.stdout != want {
		t.Errorf("version printed %q, want %q", r.stdout, want)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	info := func(v string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: v}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	clean := debug.BuildSetting{Key: "vcs.modified", Value: "false"}
	cases := []struct {
		info *debug.BuildInfo
		want string
	}{
		{info("v1.4.0"), "v1.4.0"},
		{info("v1.4.0", rev, dirty), "v1.4.0"},
		{info("(devel)", rev, clean), "dev-0123456789ab"},
		{info("(devel)", rev, dirty), "dev-0123456789ab-dirty"},
		{info(""), "dev"},
		{info("(devel)"), "dev"},
	}
	for _, tc := range cases {
		if got := versionFromBuildInfo(tc.info); got != tc.want {
			t.Errorf("versionFromBuildInfo(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
	if v := buildVersion(); v == "" || strings.ContainsAny(v, " \n") {
		t.Errorf("buildVersion() = %q", v)
	}
}
