package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/protocol"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// history is 6 s of traffic: A answers until 2 s, calls fail from 2 s to 3 s, B answers
// after; one call every 10 ms with a latency of 1 ms, 2 s for the failed ones.
func history() []bench.Op {
	var h []bench.Op
	for ms := 0; ms < 6000; ms += 10 {
		op := bench.Op{Kind: protocol.OpSet, Key: "k", Invoke: start.Add(time.Duration(ms) * time.Millisecond)}
		switch {
		case ms < 2000:
			op.Instance, op.Complete = idA, op.Invoke.Add(time.Millisecond)
		case ms < 3000:
			op.Code, op.Err, op.Complete = protocol.DeadlineExceeded, "timeout", op.Invoke.Add(100*time.Millisecond)
		default:
			op.Instance, op.Complete = idB, op.Invoke.Add(time.Millisecond)
		}
		h = append(h, op)
	}
	return h
}

func sample(t *testing.T) *Report {
	t.Helper()
	h := history()
	rec := bench.NewRecorder(false)
	for _, op := range h {
		rec.Record(op)
	}
	r := &Report{
		Scenario:    "kill-holder",
		Description: "SIGKILL the holder <under traffic> & start a replacement",
		Seed:        42,
		Lease:       time.Second,
		Command:     "abi-engine chaos --scenario kill-holder --duration 0s --seed 42",
		Start:       start,
		Elapsed:     6 * time.Second,
		Checks: []check.Result{
			check.ZeroFailures(h),
			check.NoOverlap(h, 0),
		},
		Instances: []Instance{
			{Name: "engine-1", ID: idA, Process: true, PID: 100, RolloutID: "r1", End: "killed (SIGKILL)"},
			{Name: "engine-2", ID: idB, Process: true, PID: 101, RolloutID: "r1", End: "exit 0"},
		},
		Events: []Event{
			{At: start.Add(1990 * time.Millisecond), Kind: KindFault, Subject: "engine-1", Detail: "SIGKILL"},
			{At: start.Add(2100 * time.Millisecond), Kind: KindStep, Subject: "engine-2", Detail: "started"},
			{At: start.Add(3000 * time.Millisecond), Kind: KindLease, Subject: "lease", Detail: "held by bbbbbbbb"},
			{At: start.Add(3001 * time.Millisecond), Kind: KindState, Subject: "engine-2", Detail: "serving"},
		},
		Traffic:    rec.Summary(),
		Throughput: 83,
	}
	r.BucketWidth, r.Series = Series(h, start, r.Elapsed)
	r.Finish()
	return r
}

func TestSeries(t *testing.T) {
	width, s := Series(history(), start, 6*time.Second)
	if width != 50*time.Millisecond {
		t.Fatalf("width %s", width)
	}
	var ok, failed int64
	for _, b := range s {
		ok += b.OK
		failed += b.Failed
	}
	if ok != 500 || failed != 100 {
		t.Fatalf("ok %d failed %d", ok, failed)
	}
	b := s[10] // 500-550 ms: 5 calls of 1 ms
	if b.OK != 5 || b.P50 != time.Millisecond || b.P99 != time.Millisecond || b.Max != time.Millisecond {
		t.Fatalf("bucket %+v", b)
	}
	// Setup and interrupted calls, and calls outside the run, are left out.
	extra := []bench.Op{
		{Setup: true, Invoke: start, Complete: start.Add(time.Millisecond)},
		{Interrupted: true, Code: protocol.DeadlineExceeded, Invoke: start, Complete: start.Add(time.Millisecond)},
		{Invoke: start.Add(-time.Second), Complete: start.Add(-time.Second)},
	}
	_, s = Series(extra, start, time.Second)
	for _, b := range s {
		if b.OK+b.Failed != 0 {
			t.Fatalf("bucket %+v counts calls it should leave out", b)
		}
	}
}

func TestFinish(t *testing.T) {
	r := sample(t)
	if r.Passed {
		t.Fatal("a report with a failed check passed")
	}
	if f := r.Failed(); len(f) != 1 || f[0].Name != "zero-failures" {
		t.Fatalf("failed checks %+v", f)
	}
	r.Checks = r.Checks[1:]
	r.Finish()
	if !r.Passed {
		t.Fatal("a report whose checks passed failed")
	}
	r.Error = "broker did not start"
	r.Finish()
	if r.Passed {
		t.Fatal("a report with an error passed")
	}
	empty := &Report{}
	empty.Finish()
	if empty.Passed {
		t.Fatal("a report without checks passed")
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := sample(t).Table(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"scenario kill-holder: FAIL",
		"reproduce: abi-engine chaos --scenario kill-holder --duration 0s --seed 42",
		"traffic: 600 calls, 100 failed",
		"DEADLINE_EXCEEDED 100",
		"zero-failures", "FAIL", "no-overlap", "PASS",
		"zero-failures: 100 violation(s)",
		"engine-1", "aaaaaaaa", "process 100", "killed (SIGKILL)",
		"+1.990s", "SIGKILL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	r := sample(t)
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Scenario != r.Scenario || back.Seed != 42 || back.Passed || len(back.Checks) != 2 ||
		len(back.Series) != len(r.Series) || back.Traffic.Ops != 600 || back.Lease != time.Second {
		t.Fatalf("round trip lost data: %+v", back)
	}
}

func TestWriteSVG(t *testing.T) {
	r := sample(t)
	var b bytes.Buffer
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	// Well-formed XML, with a marker per event and the escaped description text.
	dec := xml.NewDecoder(strings.NewReader(svg))
	lines, polylines := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "line":
				lines++
			case "polyline":
				polylines++
			}
		}
	}
	// Throughput is one line; max, p99 and p50 break where no call was answered (2 s
	// to 3 s): two segments each.
	if polylines != 7 {
		t.Fatalf("%d polylines, want 7", polylines)
	}
	if lines < len(r.Events) {
		t.Fatalf("%d lines for %d events", lines, len(r.Events))
	}
	for _, want := range []string{"chaos kill-holder", "FAIL", "SIGKILL", "held by bbbbbbbb", "calls/s", "latency"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if dir := os.Getenv("CHAOS_SVG_DIR"); dir != "" { // to look at it
		if err := os.WriteFile(dir+"/sample.svg", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteSVGManyEvents(t *testing.T) {
	r := sample(t)
	for i := range 200 {
		r.Events = append(r.Events, Event{At: start.Add(time.Duration(i) * 10 * time.Millisecond), Kind: KindState, Subject: "engine-1", Detail: "serving"})
	}
	var b bytes.Buffer
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "more events in the JSON report") {
		t.Fatal("a crowded timeline does not say that events were left out")
	}
	if !strings.Contains(b.String(), "SIGKILL") {
		t.Fatal("a crowded timeline dropped the faults")
	}
}
