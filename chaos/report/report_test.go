package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
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

// soak is a 90 s run with 100 handovers, each a fault, two lease changes, two engine
// states, an exit and a step, in 25 cycles of which the 7th failed a check, and a
// burst of 50 state changes within 100 ms: hundreds of events over the whole run.
func soak(t *testing.T) *Report {
	t.Helper()
	r := sample(t)
	r.Elapsed = 90 * time.Second
	r.Events = nil
	for i := range 100 {
		at := start.Add(500*time.Millisecond + time.Duration(i)*880*time.Millisecond)
		name := fmt.Sprintf("engine-%d", i+1)
		r.Events = append(r.Events,
			Event{At: at.Add(-300 * time.Millisecond), Kind: KindStep, Subject: fmt.Sprintf("engine-%d", i+2), Detail: "started process"},
			Event{At: at.Add(-100 * time.Millisecond), Kind: KindState, Subject: fmt.Sprintf("engine-%d", i+2), Detail: "standby"},
			Event{At: at, Kind: KindFault, Subject: name, Detail: "SIGTERM: hand over"},
			Event{At: at.Add(4 * time.Millisecond), Kind: KindLease, Subject: "lease", Detail: "free (revision 7)"},
			Event{At: at.Add(30 * time.Millisecond), Kind: KindLease, Subject: "lease", Detail: "held by " + fmt.Sprintf("engine-%d", i+2)},
			Event{At: at.Add(35 * time.Millisecond), Kind: KindState, Subject: fmt.Sprintf("engine-%d", i+2), Detail: "serving"},
			Event{At: at.Add(200 * time.Millisecond), Kind: KindExit, Subject: name, Detail: "exit 0"},
		)
	}
	for i := range 50 {
		r.Events = append(r.Events, Event{At: start.Add(45*time.Second + time.Duration(i)*2*time.Millisecond), Kind: KindState, Subject: "engine-x", Detail: "unknown"})
	}
	slices.SortStableFunc(r.Events, func(a, b Event) int { return a.At.Compare(b.At) })
	for i := range 25 {
		r.Cycles = append(r.Cycles, check.Cycle{N: i + 1, From: start.Add(time.Duration(i) * 3600 * time.Millisecond), To: start.Add(time.Duration(i+1) * 3600 * time.Millisecond)})
	}
	bad := check.Cycle{N: 7}.Label(check.Result{Name: "answered-only-by", Summary: "1 of 10 calls were not answered by B", Count: 1, Details: []string{"answered by A"}})
	good := check.Cycle{N: 8}.Label(check.Result{Name: "answered-only-by", Passed: true, Summary: "10 calls, all answered by C"})
	r.Checks = check.Merge([]check.Result{bad, good})
	r.Finish()
	return r
}

// svgElement is an element of the SVG with its attributes and text.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

// parseSVG reads every element of a well-formed SVG.
func parseSVG(t *testing.T, svg []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []svgElement
	var stack []int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			el := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				el.attrs[a.Name.Local] = a.Value
			}
			out = append(out, el)
			stack = append(stack, len(out)-1)
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(tok)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
}

func attrFloat(t *testing.T, el svgElement, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(el.attrs[name], 64)
	if err != nil {
		t.Fatalf("%s %s=%q: %v", el.name, name, el.attrs[name], err)
	}
	return v
}

// TestWriteSVGEveryEvent: a long run with hundreds of events draws a tick for every
// event where it happened, a marker for every fault and lease change, labels that do
// not overlap, and lists every event.
func TestWriteSVGEveryEvent(t *testing.T) {
	r := soak(t)
	var b bytes.Buffer
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("CHAOS_SVG_DIR"); dir != "" { // to look at it
		if err := os.WriteFile(dir+"/soak.svg", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	els := parseSVG(t, b.Bytes())
	ticks, markers, listed := map[int]svgElement{}, map[int]svgElement{}, map[int]svgElement{}
	var labels []svgElement
	thinTicks, cycles, failedCycles := 0, 0, 0
	for _, el := range els {
		n, _ := strconv.Atoi(el.attrs["data-event"])
		switch el.attrs["class"] {
		case "tick":
			if _, dup := ticks[n]; dup {
				t.Fatalf("event %d has two ticks", n)
			}
			ticks[n] = el
			if el.attrs["stroke-width"] == "0.5" {
				thinTicks++
			}
		case "marker":
			markers[n] = el
		case "listing":
			listed[n] = el
		case "marker-label":
			labels = append(labels, el)
		case "cycle":
			cycles++
			if el.attrs["fill"] == "#f4a5a5" {
				failedCycles++
			}
		}
	}
	if len(r.Events) < 700 {
		t.Fatalf("only %d events", len(r.Events))
	}
	for i, e := range r.Events {
		n := i + 1
		tick, ok := ticks[n]
		if !ok {
			t.Fatalf("event %d (%s) has no tick", n, eventLine(r.Start, n, e))
		}
		want := marginLeft + float64(plotWidth)*e.At.Sub(r.Start).Seconds()/r.Elapsed.Seconds()
		if x := attrFloat(t, tick, "x1"); math.Abs(x-want) > 0.06 {
			t.Fatalf("event %d at +%s drawn at x %.1f, want %.1f", n, e.At.Sub(r.Start), x, want)
		}
		if _, ok := markers[n]; ok != markerKind(e.Kind) {
			t.Fatalf("event %d (%s): marker %v", n, e.Kind, ok)
		}
		l, ok := listed[n]
		if !ok || !strings.HasPrefix(l.text, fmt.Sprintf("%d  +%s", n, offset(e.At.Sub(r.Start)))) || !strings.Contains(l.text, e.Detail) {
			t.Fatalf("event %d listed as %q", n, l.text)
		}
	}
	if len(ticks) != len(r.Events) || len(listed) != len(r.Events) {
		t.Fatalf("%d ticks and %d listed for %d events", len(ticks), len(listed), len(r.Events))
	}
	// The burst of 50 state changes in 100 ms is drawn thin.
	if thinTicks < 50 {
		t.Fatalf("%d thin ticks, want the burst's 50 at least", thinTicks)
	}
	// Labels where they fit: some, and none overlapping another in its row.
	if len(labels) < 20 {
		t.Fatalf("only %d marker labels", len(labels))
	}
	rows := map[string][]svgElement{}
	for _, l := range labels {
		rows[l.attrs["y"]] = append(rows[l.attrs["y"]], l)
	}
	for y, row := range rows {
		for i := 1; i < len(row); i++ {
			prev, cur := row[i-1], row[i]
			if attrFloat(t, cur, "x") < attrFloat(t, prev, "x")+float64(len(prev.text))*digitWidth {
				t.Fatalf("labels %s and %s overlap in the row at y %s", prev.text, cur.text, y)
			}
		}
	}
	if cycles != 25 || failedCycles != 1 {
		t.Fatalf("%d cycles drawn, %d as failed; want 25 and 1", cycles, failedCycles)
	}
}

// TestTableListsEveryEvent: the table lists every event, the cycles, and the failed
// cycle's verdict; report.json holds every event and cycle.
func TestTableListsEveryEvent(t *testing.T) {
	r := soak(t)
	var b bytes.Buffer
	if err := r.Table(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	_, events, ok := strings.Cut(out, "\nAT ")
	if !ok {
		t.Fatalf("the table has no events:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(events), "\n")[1:]
	if len(lines) != len(r.Events) {
		t.Fatalf("the table lists %d events of %d", len(lines), len(r.Events))
	}
	for i, e := range r.Events {
		f := strings.Fields(lines[i])
		if len(f) < 4 || f[0] != "+"+offset(e.At.Sub(r.Start)) || f[1] != e.Kind || f[2] != e.Subject || !strings.HasSuffix(lines[i], e.Detail) {
			t.Fatalf("event %d listed as %q", i+1, lines[i])
		}
	}
	for _, want := range []string{
		"answered-only-by: 1 violation(s)",
		"  cycle 7: 1 of 10 calls were not answered by B",
		"  - cycle 7: answered by A",
		"CYCLE  FROM", "7      +21.600s  +25.200s  FAIL answered-only-by", "25     +86.400s  +90.000s  PASS",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Events) != len(r.Events) || len(back.Cycles) != 25 || len(back.Checks) != 1 || len(back.Checks[0].Cycles) != 2 {
		t.Fatalf("report.json: %d events, %d cycles, checks %+v", len(back.Events), len(back.Cycles), back.Checks)
	}
}
