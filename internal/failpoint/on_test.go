//go:build failpoints

package failpoint

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s, err := Parse(" skip-epoch , stall-before-write=key:a:b:3s,clock-rate=1.5,drop-renewal-reply")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []Name{SkipEpoch, StallBeforeWrite, ClockRate, DropRenewalReply} {
		if !On(s, n) {
			t.Errorf("%s is off", n)
		}
	}
	if On(s, SkipFencing) || On(nil, SkipEpoch) || On(&Set{}, SkipEpoch) {
		t.Error("a fail point not given is on")
	}
	if s.stallKey != "a:b" || s.stallFor != 3*time.Second {
		t.Errorf("stall %q for %s, want key a:b (the duration is after the last colon) for 3s", s.stallKey, s.stallFor)
	}
	if Rate(s) != 1.5 || Rate(nil) != 1 {
		t.Errorf("rates %g and %g", Rate(s), Rate(nil))
	}
	want := "skip-epoch,stall-before-write=key:a:b:3s,drop-renewal-reply,clock-rate=1.5"
	if got := String(s); got != want {
		t.Errorf("String %q, want %q", got, want)
	}
	back, err := Parse(String(s))
	if err != nil || String(back) != want {
		t.Errorf("String does not read back: %q, %v", String(back), err)
	}
	if s, err := Parse("  "); s != nil || err != nil {
		t.Errorf("an empty spec: %v, %v", s, err)
	}
}

func TestParseNamesTheBadEntry(t *testing.T) {
	for spec, want := range map[string]string{
		"skip-epoch,skip-fence":                   `entry 2 "skip-fence": no fail point is named "skip-fence" (known: skip-fencing,`,
		"skip-epoch,,skip-fencing":                `entry 2 "": empty entry`,
		"skip-epoch=yes":                          `entry 1 "skip-epoch=yes": skip-epoch takes no value`,
		"clock-rate=fast":                         `entry 1 "clock-rate=fast": clock-rate takes a positive number`,
		"clock-rate=-2":                           `clock-rate takes a positive number`,
		"clock-rate=+Inf":                         `clock-rate takes a positive number`,
		"clock-rate":                              `clock-rate takes a positive number`,
		"stall-before-write=zombie:3s":            `stall-before-write takes key:<key>:<duration>`,
		"stall-before-write=key:zombie":           `stall-before-write takes key:<key>:<duration>`,
		"stall-before-write=key::3s":              `stall-before-write takes key:<key>:<duration>`,
		"stall-before-write=key:zombie:soon":      `"soon" is not a positive duration`,
		"stall-before-write=key:zombie:0s":        `"0s" is not a positive duration`,
		"skip-epoch,clock-rate=2,skip-epoch":      `entry 3 "skip-epoch": skip-epoch is given twice (entry 1 too)`,
		"resend-unknown,drop-renewal-reply=twice": `entry 2 "drop-renewal-reply=twice": drop-renewal-reply takes no value`,
	} {
		s, err := Parse(spec)
		var se *SpecError
		if s != nil || !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, %v; want a *SpecError containing %q", spec, s, err, want)
		}
	}
}

func TestMerge(t *testing.T) {
	got, err := Merge("clock-rate=1.5,skip-epoch", "", "clock-rate=2.5,stall-before-write=key:z:1s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "skip-epoch,clock-rate=2.5,stall-before-write=key:z:1s"; got != want {
		t.Fatalf("Merge = %q, want %q", got, want)
	}
	if _, err := Merge("skip-epoch", "clock-rate=0"); err == nil {
		t.Fatal("Merge took a bad entry")
	}
}

func TestStall(t *testing.T) {
	s, err := Parse("stall-before-write=key:zombie:1ms")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fired []string
	Notify(s, func(n Name, detail string) {
		mu.Lock()
		defer mu.Unlock()
		fired = append(fired, string(n)+": "+detail)
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	if got := Stall(s, ctx, []byte(`{"key":"other","value":"eA=="}`)); got != ctx {
		t.Fatal("a call on another key was stalled")
	}
	if got := Stall(s, ctx, []byte(`not json`)); got != ctx {
		t.Fatal("a body that is not JSON was stalled")
	}
	got := Stall(s, ctx, []byte(`{"key":"zombie","value":"eA=="}`))
	cancel()
	if got.Err() != nil || got.Value(ctxKey{}) != "v" {
		t.Fatalf("the stalled call's context: err %v, value %v; want deaf to cancellation, values kept", got.Err(), got.Value(ctxKey{}))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fired) != 2 || !strings.Contains(fired[0], `stalling a call on key "zombie" for 1ms`) {
		t.Fatalf("fired %q", fired)
	}
}

type ctxKey struct{}

func TestResend(t *testing.T) {
	n := 0
	write := func() error {
		n++
		if n == 2 {
			return errors.New("second")
		}
		return nil
	}
	if err := Resend(nil, write)(); err != nil || n != 1 {
		t.Fatalf("without resend-unknown: %v after %d writes", err, n)
	}
	s, _ := Parse("resend-unknown")
	n = 0
	if err := Resend(s, write)(); err == nil || err.Error() != "second" || n != 2 {
		t.Fatalf("with resend-unknown: %v after %d writes; want the second outcome of two", err, n)
	}
}
