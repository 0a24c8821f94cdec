package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/abi-engine/engine/bench"
)

// TestProtobufTrafficAcrossHandovers: with Options.Protobuf the handover scenario
// drives protobuf calls (with service tokens, which the run's engines then require)
// beside the JSON ones, records them in the same history, and passes every check:
// no protobuf call fails across the handovers either, and more than one engine
// answered them.
func TestProtobufTrafficAcrossHandovers(t *testing.T) {
	out := t.TempDir()
	rep := runScenario(t, "handover", Options{Seed: ciSeed, Protobuf: true, Out: out})
	if !rep.Passed {
		t.Fatalf("handover with protobuf traffic failed:\n%s", table(t, rep))
	}
	f, err := os.Open(filepath.Join(out, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pb, pbFailed, json_ int
	instances := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var op bench.Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(op.Key, protobufKeyPrefix) {
			json_++
			continue
		}
		pb++
		if op.Failed() {
			pbFailed++
			t.Errorf("protobuf call failed: %+v", op)
		}
		instances[op.Instance] = true
	}
	if pb == 0 || json_ == 0 || pbFailed != 0 || len(instances) < 2 {
		t.Fatalf("history: %d protobuf calls (%d failed) answered by %d engines, %d JSON calls; want both codecs, none failed, 2 engines at least", pb, pbFailed, len(instances), json_)
	}
}
