// Package fsmtabletest checks, in a test, that a machine's doc comment shows the
// transition table (package fsmtable) the machine consults: a table edited in code
// and not in prose, or the reverse, fails the machine's own tests.
package fsmtabletest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// Texter is a table that renders itself (*fsmtable.Table).
type Texter interface{ Text() string }

// CheckDoc fails t unless the doc comment of the type typeName, declared in the Go
// file at path, holds table's text (Doc).
func CheckDoc(t testing.TB, path, typeName string, table Texter) {
	t.Helper()
	if err := Doc(path, typeName, table); err != nil {
		t.Fatal(err)
	}
}

// Doc is nil when the doc comment of the type typeName, declared in the Go file at
// path, holds table's text as a block gofmt keeps (every line indented by a tab, its
// trailing blanks trimmed); else an error that names the type and gives the block the
// comment should hold.
func Doc(path, typeName string, table Texter) error {
	doc, err := typeDoc(path, typeName)
	if err != nil {
		return err
	}
	if want := block(table.Text()); !strings.Contains(doc, want) {
		return fmt.Errorf("%s's doc comment lacks the transition table; it should read:\n%s", typeName, want)
	}
	return nil
}

// block is text as a doc comment's code block reads once parsed: each line indented
// by a tab, its trailing blanks trimmed, and empty lines left empty.
func block(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			b.WriteString("\t" + l + "\n")
		} else {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// typeDoc is the doc comment of the type typeName declared in the file at path; ""
// when the type has none.
func typeDoc(path, typeName string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var doc string
	ast.Inspect(f, func(n ast.Node) bool {
		if g, ok := n.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			if ts := g.Specs[0].(*ast.TypeSpec); ts.Name.Name == typeName {
				doc = g.Doc.Text()
			}
		}
		return true
	})
	return doc, nil
}
