//go:build !failpoints

package failpoint

import (
	"context"
	"errors"
)

// Enabled reports whether this build has fail points (the tag failpoints).
const Enabled = false

// Set is empty in a build without the tag failpoints: there is nothing to switch on.
// (An alias of struct{}, so that not even its type's name reaches the binary.)
type Set = struct{}

// Parse refuses every spec but "": this build has no fail points.
func Parse(spec string) (*Set, error) {
	if spec == "" {
		return nil, nil
	}
	return nil, errors.New("failpoint: this build has no fail points (build with -tags failpoints)")
}

// Merge refuses every spec but "": this build has no fail points.
func Merge(specs ...string) (string, error) {
	for _, s := range specs {
		if s != "" {
			return "", errors.New("failpoint: this build has no fail points (build with -tags failpoints)")
		}
	}
	return "", nil
}

// String is "" in this build.
func String(*Set) string { return "" }

// Notify does nothing in this build.
func Notify(*Set, func(Name, string)) {}

// On is false in this build.
func On(*Set, Name) bool { return false }

// Rate is 1 in this build.
func Rate(*Set) float64 { return 1 }

// Stall returns ctx at once in this build.
func Stall(_ *Set, ctx context.Context, _ []byte) context.Context { return ctx }

// Resend returns write in this build.
func Resend(_ *Set, write func() error) func() error { return write }
