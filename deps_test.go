package engine_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/abi-engine/engine"

type pkg struct {
	ImportPath string
	Dir        string
	Deps       []string
	GoFiles    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestDependencyDirection keeps docs/design.md §2's layering: imports point one way, so the
// lease core stays free of NATS and hollywood, and only the wiring knows everything.
func TestDependencyDirection(t *testing.T) {
	rules := []struct {
		pkg       string // import path relative to the module, "" = the root
		forbidden []string
	}{
		{"lease", []string{"github.com/nats-io/", "github.com/anthdm/hollywood", module + "/"}},
		{"config", []string{module + "/"}},
		{"protocol", []string{module + "/", "github.com/anthdm/hollywood"}},
		{"client", []string{module + "/primaries", module + "/sessions", module + "/actors", module + "/lease", module + "/config", module + "/supervisor", "github.com/anthdm/hollywood"}},
		{"actors", []string{"github.com/nats-io/", module + "/config", module + "/supervisor", module + "/primaries", module + "/sessions"}},
		{"sessions", []string{module + "/config", module + "/supervisor", module + "/primaries"}},
		{"primaries", []string{module + "/config", module + "/supervisor"}},
		// The machines' transition tables: a leaf on the standard library, so that lease
		// (which may import nothing else of ours) and actors can both use it without a cycle.
		{"internal/fsmtable", []string{module + "/", "github.com/nats-io/", "github.com/anthdm/hollywood"}},
	}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, r := range rules {
			if rel != r.pkg && !strings.HasPrefix(rel, r.pkg+"/") {
				continue
			}
			if r.pkg == "lease" && rel != "lease" && rel != "lease/leasetest" {
				continue // lease/jetstreamstore is the adapter that may import NATS
			}
			for _, dep := range p.Deps {
				for _, f := range r.forbidden {
					if strings.HasPrefix(dep, f) && !allowed(rel, dep) {
						t.Errorf("%s imports %s, against the dependency direction", p.ImportPath, dep)
					}
				}
			}
		}
	}
}

// allowed lists the imports within our module that a rule's prefix would otherwise forbid.
func allowed(rel, dep string) bool {
	switch {
	case rel == "lease/leasetest" && dep == module+"/lease":
		return true
	case strings.HasPrefix(rel, "client") && dep == module+"/protocol":
		return true
	case dep == module+"/internal/redact":
		return true // a leaf every package may use to print a URL
	case dep == module+"/internal/notify":
		return true // the one close-and-replace primitive, a leaf on the standard library
	case dep == module+"/internal/failpoint":
		return true // the fail points, a leaf on the standard library compiled away without its tag
	case dep == module+"/internal/fsmtable":
		// The transition tables of the lease's and the handover's machines (lease and
		// actors import it, and so whatever imports them): a leaf on the standard
		// library, which its own rule above keeps, so no import of it makes a cycle.
		return true
	}
	return false
}

// TestEveryPackageHasOneDoc keeps a package doc comment in every package, in one file.
func TestEveryPackageHasOneDoc(t *testing.T) {
	for _, p := range listPackages(t) {
		docs := 0
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.HasPrefix(strings.TrimSpace(file.Doc.Text()), "Package ") {
				docs++
			}
		}
		if docs != 1 {
			t.Errorf("%s has %d package doc comments, want 1", p.ImportPath, docs)
		}
	}
	if _, err := os.Stat("README.md"); err != nil {
		t.Error("no README.md")
	}
}
