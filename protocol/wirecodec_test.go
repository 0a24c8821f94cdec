package protocol

import "testing"

func TestIsJSON(t *testing.T) {
	cases := []struct {
		body string
		want bool
	}{
		{`{"key":"k"}`, true},
		{`{`, true}, // JSON's own error: "not valid JSON"
		{`[1]`, true},
		{` {"key":"k"}`, true},
		{`"k"`, true},
		{``, false},
		{"\x0a\x06\x0a\x01t\x10\x90\x4e\x12\x01k", false}, // a Python GetRequest
		{"\x12\x01k", false},
		{"\xff", false},
		{"\x0a", false}, // white space alone is not JSON
	}
	for _, c := range cases {
		if got := IsJSON([]byte(c.body)); got != c.want {
			t.Errorf("IsJSON(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}

func FuzzIsJSON(f *testing.F) {
	f.Add([]byte(`{"key":"k"}`))
	f.Add([]byte("\x0a\x06\x0a\x01t\x10\x90\x4e\x12\x01k"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[0] == '{' && !IsJSON(b) {
			t.Fatalf("a body starting with { is not JSON: %q", b)
		}
		if len(b) == 0 && IsJSON(b) {
			t.Fatal("the empty body is JSON")
		}
	})
}
