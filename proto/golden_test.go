package proto_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/abi-engine/engine/proto/abi/common/v1"
	_ "github.com/abi-engine/engine/proto/abi/discovery/v1"
	_ "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	_ "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	_ "github.com/abi-engine/engine/proto/abi/transfer/v1"
)

// fill writes the bytes of vectors that have none yet; review every line it fills
// against the proto rules (or the CI cross-check) before committing it.
var fill = flag.Bool("fill", false, "fill in the bytes of vectors that have none")

const goldenFile = "testdata/golden.txt"

type vector struct {
	line            int
	name, typ, text string
	want            []byte
	hasWant         bool
}

func readVectors(t *testing.T) ([]string, []*vector) {
	t.Helper()
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var vs []*vector
	for i, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		parts := strings.Split(l, "|")
		if len(parts) != 4 {
			t.Fatalf("%s:%d: want 4 fields separated by |, got %d", goldenFile, i+1, len(parts))
		}
		v := &vector{line: i, name: strings.TrimSpace(parts[0]), typ: strings.TrimSpace(parts[1]), text: strings.TrimSpace(parts[2])}
		switch h := strings.ReplaceAll(strings.TrimSpace(parts[3]), " ", ""); h {
		case "":
		case "empty":
			v.want, v.hasWant = []byte{}, true
		default:
			v.want, err = hex.DecodeString(h)
			if err != nil {
				t.Fatalf("%s:%d: bytes: %v", goldenFile, i+1, err)
			}
			v.hasWant = true
		}
		vs = append(vs, v)
	}
	return lines, vs
}

// TestGoldenVectors: every vector's text-format message encodes to its bytes, and its
// bytes decode to the same message. The Python clients' bytes follow the same rules,
// which the CI cross-check confirms with another protobuf implementation.
func TestGoldenVectors(t *testing.T) {
	lines, vs := readVectors(t)
	if len(vs) < 40 {
		t.Fatalf("%d vectors, want at least 40", len(vs))
	}
	filled := false
	for _, v := range vs {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(v.typ))
		if err != nil {
			t.Errorf("%s: %v", v.name, err)
			continue
		}
		m := mt.New().Interface()
		if err := prototext.Unmarshal([]byte(v.text), m); err != nil {
			t.Errorf("%s: text: %v", v.name, err)
			continue
		}
		got, err := proto.Marshal(m)
		if err != nil {
			t.Errorf("%s: marshal: %v", v.name, err)
			continue
		}
		if !v.hasWant {
			if *fill {
				lines[v.line] = strings.TrimRight(lines[v.line], " ") + " " + hex.EncodeToString(got)
				filled = true
				continue
			}
			t.Errorf("%s: no bytes (run with -fill)", v.name)
			continue
		}
		if !bytes.Equal(got, v.want) {
			t.Errorf("%s: encodes to %x, want %x", v.name, got, v.want)
		}
		back := mt.New().Interface()
		if err := proto.Unmarshal(v.want, back); err != nil || !proto.Equal(back, m) {
			t.Errorf("%s: %x decodes to %v (%v), want %v", v.name, v.want, back, err, m)
		}
	}
	if filled {
		if err := os.WriteFile(goldenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
