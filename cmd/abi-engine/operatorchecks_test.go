package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testpki"
)

// TestProcessConfigCheckReadsCredsAndCertificates: config check parses the .creds file
// and checks the client certificate's dates, so a garbage .creds file and an expired
// certificate are refused before a deploy (exit 2, naming the file and the dates)
// instead of an engine failing at connect with a broken pipe.
func TestProcessConfigCheckReadsCredsAndCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	garbage := writeFile(t, dir, "engine.creds", "this is not a creds file\n")
	cfg := writeFile(t, dir, "creds.yaml", "nats:\n  url: nats://127.0.0.1:4222\n  credentials: "+garbage+"\n")
	code, _, errOut := runBinary(t, nil, "config", "check", "--config", cfg)
	if code != exitUsage || !strings.Contains(errOut, "nats.credentials") || !strings.Contains(errOut, garbage) || !strings.Contains(errOut, "no valid user JWT") {
		t.Errorf("config check of a garbage .creds file: exit %d, want 2 naming the file:\n%s", code, errOut)
	}

	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ca.ClientValid("expired", time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	cfg = writeFile(t, dir, "tls.yaml", "nats:\n  url: tls://127.0.0.1:4222\n  tls: {ca_file: "+ca.CertFile+", cert_file: "+expired.CertFile+", key_file: "+expired.KeyFile+"}\n")
	code, _, errOut = runBinary(t, nil, "config", "check", "--config", cfg)
	for _, w := range []string{"nats.tls.cert_file", expired.CertFile, "expired on 2024-01-01T00:00:00Z", "valid from 2023-01-01T00:00:00Z until 2024-01-01T00:00:00Z"} {
		if code != exitUsage || !strings.Contains(errOut, w) {
			t.Errorf("config check of an expired client certificate: exit %d, want 2 saying %q:\n%s", code, w, errOut)
		}
	}
}

// TestProcessCallReadsAParkedReply: step-down --to with an id no engine can have is a
// usage error (exit 2) before anything is asked, not "no standby" (exit 3). And a keyvalue get whose reply is larger than one
// message (a 786,414-byte value: its base64 fills a 1 MiB set exactly, and the get's
// reply is 26 bytes more) is read through the engine's parked reply, as the SDK reads
// it, instead of failing PAYLOAD_TOO_LARGE.
func TestProcessCallReadsAParkedReply(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	e := startEngine(t, sharedEngineConfig(srv.URL()))
	e.waitReady(t)

	code, _, errOut := runBinary(t, nil, "step-down", "--to", "bad id", "--nats", srv.URL())
	if code != exitUsage || !strings.Contains(errOut, `--to "bad id" is not a rollout id`) {
		t.Errorf("step-down --to 'bad id': exit %d, want 2 naming the rule:\n%s", code, errOut)
	}
	if st := e.status(t); st.State != "serving" {
		t.Errorf("after a refused step-down the engine is %s, want serving", st.State)
	}

	value := make([]byte, 786_414)
	if _, err := rand.Read(value); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"key": "big", "value": value})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "set.json")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runBinary(t, nil, "call", "keyvalue", "set", "@"+file, "--nats", srv.URL()); code != 0 {
		t.Fatalf("call keyvalue set of a %d-byte body: exit %d\n%s", len(body), code, errOut)
	}
	code, out, errOut := runBinary(t, nil, "call", "keyvalue", "get", `{"key":"big"}`, "--nats", srv.URL())
	var reply struct {
		Found bool   `json:"found"`
		Value []byte `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &reply); code != 0 || err != nil || !reply.Found {
		t.Fatalf("call keyvalue get of a %d-byte value: exit %d (%v)\n%s", len(value), code, err, errOut)
	}
	if !bytes.Equal(reply.Value, value) {
		t.Fatalf("the value reads back as %d bytes, want the %d set", len(reply.Value), len(value))
	}
	if !strings.Contains(errOut, "answered by engine "+e.status(t).InstanceID) {
		t.Errorf("call does not name the engine that answered:\n%s", errOut)
	}

}

// TestDoctorReplicasSentenceIsWhole: the WARN of a one-replica bucket on a cluster says
// what happens while its node is down, to the end of the sentence.
func TestDoctorReplicasSentenceIsWhole(t *testing.T) {
	d := &doctor{nodes: 3}
	f, bad := d.replicasAgainstCluster("lease bucket", "nats.engine.lease_replicas", 1)
	if !bad || f.Verdict != verdictWarn {
		t.Fatalf("R1 on 3 nodes: %v %+v, want a WARN", bad, f)
	}
	if !strings.HasSuffix(f.Reason, "while that node is down") {
		t.Errorf("the reason is cut off: %q", f.Reason)
	}
}
