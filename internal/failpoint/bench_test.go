package failpoint

import "testing"

// sink keeps the checks' results alive, so the benchmark measures them.
var sink int

// BenchmarkOn measures a fail-point check as the sites make it. Without the tag it is a
// constant false the compiler removes: the loop costs what an empty one does (about
// 0.3 ns an iteration); with -tags failpoints it is a nil test and a map lookup.
func BenchmarkOn(b *testing.B) {
	var s *Set
	for b.Loop() {
		if On(s, SkipLeaseCheck) {
			sink++
		}
	}
}

// BenchmarkEmpty is the empty loop BenchmarkOn is compared with.
func BenchmarkEmpty(b *testing.B) {
	for b.Loop() {
	}
}
