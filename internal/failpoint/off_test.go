//go:build !failpoints

package failpoint

import (
	"context"
	"testing"
)

// TestOffBuild shows what a build without the tag does: every check is off, and a spec
// that asks for a fail point is refused, naming the tag.
func TestOffBuild(t *testing.T) {
	if Enabled {
		t.Fatal("Enabled without the tag")
	}
	if s, err := Parse("skip-epoch"); s != nil || err == nil {
		t.Fatalf("Parse took a spec: %v, %v", s, err)
	}
	if s, err := Parse(""); s != nil || err != nil {
		t.Fatalf("Parse of nothing: %v, %v", s, err)
	}
	s := &Set{}
	ctx := context.Background()
	if On(s, SkipEpoch) || Rate(s) != 1 || Stall(s, ctx, []byte(`{"key":"zombie"}`)) != ctx || String(s) != "" {
		t.Fatal("a fail point is on")
	}
}
