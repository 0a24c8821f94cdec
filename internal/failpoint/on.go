//go:build failpoints

package failpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Enabled reports whether this build has fail points (the tag failpoints).
const Enabled = true

// known lists every fail point in the order String writes them.
var known = []Name{SkipFencing, ReleaseBeforeJobs, ServeAfterRelease, SkipSuccessor, SkipLeaseCheck, SkipEpoch,
	ResendUnknown, StallBeforeWrite, DropRenewalReply, ClockRate, DropRegistryRecord, RegisterTwice}

// Set is the fail points switched on in one engine. The zero Set and a nil one switch
// none on. It is read from any goroutine; only Notify changes it, before the engine
// runs.
type Set struct {
	on        map[Name]bool
	stallKey  string
	stallFor  time.Duration
	rate      float64
	notify    atomic.Pointer[func(Name, string)]
	canonical string
}

// SpecError is a spec entry Parse refuses.
type SpecError struct {
	// Entry is the entry's position, from 1; Text the entry as given.
	Entry int
	Text  string
	// Reason says what is wrong with it.
	Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("failpoint: entry %d %q: %s", e.Entry, e.Text, e.Reason)
}

// entry is one name=value of a spec.
type entry struct {
	name  Name
	value string
	has   bool // "=value" was given
	text  string
}

// entries splits spec into its entries, checking that each names a fail point and
// that none is given twice.
func entries(spec string) ([]entry, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []entry
	seen := map[Name]int{}
	for i, text := range strings.Split(spec, ",") {
		text = strings.TrimSpace(text)
		n := i + 1
		if text == "" {
			return nil, &SpecError{Entry: n, Text: text, Reason: "empty entry (fail points are separated by single commas)"}
		}
		name, value, has := strings.Cut(text, "=")
		e := entry{name: Name(strings.TrimSpace(name)), value: strings.TrimSpace(value), has: has, text: text}
		if !slices.Contains(known, e.name) {
			return nil, &SpecError{Entry: n, Text: text, Reason: fmt.Sprintf("no fail point is named %q (known: %s)", e.name, knownList())}
		}
		if first, dup := seen[e.name]; dup {
			return nil, &SpecError{Entry: n, Text: text, Reason: fmt.Sprintf("%s is given twice (entry %d too)", e.name, first)}
		}
		seen[e.name] = n
		out = append(out, e)
	}
	return out, nil
}

func knownList() string {
	s := make([]string, len(known))
	for i, n := range known {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// Parse reads a spec: fail points separated by commas, each a name or name=value.
// stall-before-write takes key:K:D (a key without commas, a duration), clock-rate a
// positive number; the others take no value. "" is nil: no fail point. An error is a
// *SpecError naming the entry and what is wrong with it.
func Parse(spec string) (*Set, error) {
	es, err := entries(spec)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	s := &Set{on: map[Name]bool{}, rate: 1}
	for i, e := range es {
		bad := func(reason string) error { return &SpecError{Entry: i + 1, Text: e.text, Reason: reason} }
		switch e.name {
		case StallBeforeWrite:
			rest, ok := strings.CutPrefix(e.value, "key:")
			at := strings.LastIndex(rest, ":")
			if !e.has || !ok || at <= 0 {
				return nil, bad("stall-before-write takes key:<key>:<duration>, e.g. stall-before-write=key:zombie:3s")
			}
			d, err := time.ParseDuration(rest[at+1:])
			if err != nil || d <= 0 {
				return nil, bad(fmt.Sprintf("stall-before-write: %q is not a positive duration (e.g. 3s)", rest[at+1:]))
			}
			s.stallKey, s.stallFor = rest[:at], d
		case ClockRate:
			r, err := strconv.ParseFloat(e.value, 64)
			if !e.has || err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
				return nil, bad("clock-rate takes a positive number, the clock's speed against the real one, e.g. clock-rate=1.5")
			}
			s.rate = r
		default:
			if e.has {
				return nil, bad(fmt.Sprintf("%s takes no value", e.name))
			}
		}
		s.on[e.name] = true
	}
	s.canonical = s.format()
	return s, nil
}

// format writes the set as a spec, in the order of known.
func (s *Set) format() string {
	var parts []string
	for _, n := range known {
		if !s.on[n] {
			continue
		}
		switch n {
		case StallBeforeWrite:
			parts = append(parts, fmt.Sprintf("%s=key:%s:%s", n, s.stallKey, s.stallFor))
		case ClockRate:
			parts = append(parts, fmt.Sprintf("%s=%s", n, strconv.FormatFloat(s.rate, 'g', -1, 64)))
		default:
			parts = append(parts, string(n))
		}
	}
	return strings.Join(parts, ",")
}

// Merge joins specs into one; an entry of a later spec replaces the entry of the same
// name of an earlier one (a scenario's defaults, then what its caller asked for).
func Merge(specs ...string) (string, error) {
	var out []entry
	for _, spec := range specs {
		es, err := entries(spec)
		if err != nil {
			return "", err
		}
		for _, e := range es {
			out = slices.DeleteFunc(out, func(o entry) bool { return o.name == e.name })
			out = append(out, e)
		}
	}
	texts := make([]string, len(out))
	for i, e := range out {
		texts[i] = e.text
	}
	merged := strings.Join(texts, ",")
	if _, err := Parse(merged); err != nil {
		return "", err
	}
	return merged, nil
}

// String is the set as a spec Parse reads back; "" for none.
func String(s *Set) string {
	if s == nil {
		return ""
	}
	return s.canonical
}

// Notify makes f see every fail point that fires, with what it did (the engine logs
// them). Call it before the engine runs.
func Notify(s *Set, f func(Name, string)) {
	if s != nil {
		s.notify.Store(&f)
	}
}

func (s *Set) fire(n Name, format string, args ...any) {
	if f := s.notify.Load(); f != nil {
		(*f)(n, fmt.Sprintf(format, args...))
	}
}

// On reports whether fail point n is switched on in s.
func On(s *Set, n Name) bool { return s != nil && s.on[n] }

// Rate is the speed of the lease timing's clock against the real one: clock-rate, 1
// when it is off.
func Rate(s *Set) float64 {
	if !On(s, ClockRate) {
		return 1
	}
	return s.rate
}

// Stall is stall-before-write. A primary calls it between a call's lease
// check and its operation, with the request body: when the body names the stalled
// key ({"key": K}), it waits the stall's duration and returns a context deaf to
// ctx's cancellation (its values kept), so the operation runs afterwards whatever
// happened meanwhile, as that of a process paused in between would. Otherwise it
// returns ctx at once.
func Stall(s *Set, ctx context.Context, body []byte) context.Context {
	if !On(s, StallBeforeWrite) {
		return ctx
	}
	var req struct {
		Key *string `json:"key"`
	}
	if json.Unmarshal(body, &req) != nil || req.Key == nil || *req.Key != s.stallKey {
		return ctx
	}
	s.fire(StallBeforeWrite, "stalling a call on key %q for %s after its lease check", s.stallKey, s.stallFor)
	t := time.NewTimer(s.stallFor)
	<-t.C
	s.fire(StallBeforeWrite, "the call on key %q goes on after its stall of %s", s.stallKey, s.stallFor)
	return context.WithoutCancel(ctx)
}

// Resend is resend-unknown for one write: it returns a write that runs write, and,
// when resend-unknown is on, takes its outcome as unknown and runs it once more,
// returning the second outcome.
func Resend(s *Set, write func() error) func() error {
	if !On(s, ResendUnknown) {
		return write
	}
	return func() error {
		first := write()
		s.fire(ResendUnknown, "a write's outcome (%v) taken as unknown: sending it again", first)
		return write()
	}
}
