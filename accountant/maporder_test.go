package accountant

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mapRangesAllowed lists the ranges over maps that the accountant's code
// may keep, by file and function, each with why its result does not
// depend on Go's random map order.
var mapRangesAllowed = map[string]string{
	"compare.go:closedFormMap": "fills another map, one entry per name: the order of the writes is not observable",
}

// TestNoMapOrderInAccountant: the accountant's evaluations are pure
// functions of their arguments (memo.go), and its decompositions of theirs
// (decompose_memo.go), because nothing in them depends on the order in
// which Go ranges over a map, which changes from run to run. A range over
// a map decided which lower-bound triples a sparse matrix kept until
// review 63 found it (lower bounds from 8e-6 to 3.4e-3 across runs of one
// query). This test type-checks the package's non-test files (those this
// build compiles) and fails on any range over a map outside
// mapRangesAllowed.
func TestNoMapOrderInAccountant(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	if build.Default.GOROOT == "" {
		// Built with -trimpath (the Makefile's GOFLAGS), the test binary
		// does not know GOROOT, which the source importer needs.
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			t.Fatalf("go env GOROOT: %v", err)
		}
		build.Default.GOROOT = strings.TrimSpace(string(out))
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		// Only the files this build compiles (hugepage_linux.go or
		// hugepage_other.go, by GOOS).
		if ok, err := build.Default.MatchFile(".", n); err != nil {
			t.Fatal(err)
		} else if !ok {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("accountant", fset, files, info); err != nil {
		t.Fatalf("type-checking the accountant: %v", err)
	}
	found := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				r, ok := n.(*ast.RangeStmt)
				if !ok {
					return true
				}
				tv, ok := info.Types[r.X]
				if !ok {
					t.Errorf("%v: no type for a range expression", fset.Position(r.Pos()))
					return true
				}
				if _, isMap := tv.Type.Underlying().(*types.Map); !isMap {
					return true
				}
				pos := fset.Position(r.Pos())
				key := fmt.Sprintf("%s:%s", filepath.Base(pos.Filename), fn.Name.Name)
				found[key] = true
				if _, ok := mapRangesAllowed[key]; !ok {
					t.Errorf("%v (%s): a range over a map; its order changes from run to run. Range over sorted keys (slices.Sorted(maps.Keys(m))), or add it to mapRangesAllowed with the reason its result cannot depend on the order", pos, fn.Name.Name)
				}
				return true
			})
		}
	}
	for key := range mapRangesAllowed {
		if !found[key] {
			t.Errorf("mapRangesAllowed lists %s, which no longer ranges over a map: drop it", key)
		}
	}
}
