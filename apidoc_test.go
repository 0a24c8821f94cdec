package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestEveryExportedIdentifierIsDocumented keeps the root package's public surface
// (docs/embedding.md) documented: every exported function, method, type, constant and
// variable has a doc comment, so `go doc github.com/abi-engine/engine` reads as a
// guide.
func TestEveryExportedIdentifierIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, f := range pkgs["engine"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				missing = append(missing, fset.Position(d.Pos()).String()+" "+d.Name.Name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					var names []*ast.Ident
					var doc *ast.CommentGroup
					switch s := s.(type) {
					case *ast.TypeSpec:
						names, doc = []*ast.Ident{s.Name}, s.Doc
					case *ast.ValueSpec:
						names, doc = s.Names, s.Doc
						if doc == nil {
							doc = s.Comment
						}
					}
					if doc == nil {
						doc = d.Doc // a group's doc covers its members
					}
					for _, n := range names {
						if n.IsExported() && doc == nil {
							missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
						}
					}
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("exported identifiers without a doc comment:\n%s", strings.Join(missing, "\n"))
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	typ := fl.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
