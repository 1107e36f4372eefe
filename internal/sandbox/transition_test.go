package sandbox

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allowedMoves is the table written out a second time, by hand, pair by
// pair: the walk below checks transitions against it, so that a change to
// the table is a change to this list too.
var allowedMoves = map[[2]State]bool{
	{"", StateStarting}:           true,
	{"", StateRunning}:            true,
	{StateStarting, StateRunning}: true,
	{StateStarting, StatePaused}:  true,
	{StateRunning, StatePaused}:   true,
	{StatePaused, StateStarting}:  true,
	{StateStarting, StateEnded}:   true,
	{StateRunning, StateEnded}:    true,
	{StatePaused, StateEnded}:     true,
}

// allowedEnds: for each state that may end, the reasons it may end with.
var allowedEnds = map[State][]EndReason{
	StateStarting: {EndStopped, EndHostRestart, EndNodeLost, EndError, EndOutOfMemory},
	StateRunning:  {EndStopped, EndLeaseEnded, EndOutOfMemory, EndSpendingLimit, EndHostRestart, EndNodeLost, EndError},
	StatePaused:   {EndStopped, EndRetentionEnded, EndNodeLost, EndError, EndOutOfMemory},
}

// TestTransitionTable walks every pair of states (and, into ended, every
// end reason): each allowed one is done by Move or End, each other one is
// refused with a conflict and leaves the record as it was.
func TestTransitionTable(t *testing.T) {
	from := append([]State{""}, allStates...)
	for _, f := range from {
		for _, to := range allStates {
			if to == StateEnded {
				for _, reason := range allEndReasons {
					want := allowedMoves[[2]State{f, to}] && slices.Contains(allowedEnds[f], reason)
					t.Run(fmt.Sprintf("%q->ended(%s)", f, reason), func(t *testing.T) {
						checkEnd(t, f, reason, want)
					})
				}
				continue
			}
			want := allowedMoves[[2]State{f, to}]
			t.Run(fmt.Sprintf("%q->%s", f, to), func(t *testing.T) {
				checkMove(t, f, to, want)
			})
		}
	}
}

func checkMove(t *testing.T, from, to State, want bool) {
	t.Helper()
	rec := Record{ID: "sb", State: from, EndMessage: "as it was"}
	before := rec
	err := rec.Move(to)
	if !want {
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("Move(%q -> %s) = %v, want a conflict", from, to, err)
		}
		if !reflect.DeepEqual(rec, before) {
			t.Fatalf("a refused Move changed the record: got %+v, want %+v", rec, before)
		}
		return
	}
	if err != nil {
		t.Fatalf("Move(%q -> %s) = %v, want it allowed", from, to, err)
	}
	want2 := before
	want2.State = to
	if !reflect.DeepEqual(rec, want2) {
		t.Fatalf("Move(%q -> %s) made %+v, want %+v", from, to, rec, want2)
	}
	if err := allowed(from, to, ""); err != nil {
		t.Fatalf("allowed(%q, %s) = %v after Move did it", from, to, err)
	}
}

func checkEnd(t *testing.T, from State, reason EndReason, want bool) {
	t.Helper()
	retention := time.Unix(100, 0)
	rec := Record{ID: "sb", State: from, RetentionEndsAt: &retention}
	before := rec
	at := time.Unix(200, 0)
	err := rec.End(reason, "why", at)
	if !want {
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("End(%q, %s) = %v, want a conflict", from, reason, err)
		}
		if !reflect.DeepEqual(rec, before) {
			t.Fatalf("a refused End changed the record: got %+v, want %+v", rec, before)
		}
		return
	}
	if err != nil {
		t.Fatalf("End(%q, %s) = %v, want it allowed", from, reason, err)
	}
	if rec.State != StateEnded || rec.EndReason != reason || rec.EndMessage != "why" || rec.EndedAt == nil || !rec.EndedAt.Equal(at) || rec.RetentionEndsAt != nil {
		t.Fatalf("End(%q, %s) made %+v, want it ended at %v with reason, message and no retention", from, reason, rec, at)
	}
	// Move never ends a record: an end needs its reason.
	rec = before
	if err := rec.Move(StateEnded); !errors.Is(err, ErrConflict) || !reflect.DeepEqual(rec, before) {
		t.Fatalf("Move(%q -> ended) = %v (record %+v), want a conflict and the record as it was", from, err, rec)
	}
}

// TestTablesCoverEveryState: every state and end reason declared in
// state.go is in allStates and allEndReasons, and has its row, so a new one
// cannot slip past the table (a state missing from transitions would
// silently allow nothing, which the walk above would not notice).
func TestTablesCoverEveryState(t *testing.T) {
	declared := declaredConsts(t, "state.go")
	var states []State
	var reasons []EndReason
	for _, v := range declared["State"] {
		states = append(states, State(v))
	}
	for _, v := range declared["EndReason"] {
		reasons = append(reasons, EndReason(v))
	}
	for _, s := range states {
		if !slices.Contains(allStates, s) {
			t.Errorf("state %s is declared but not in allStates", s)
		}
	}
	for _, r := range reasons {
		if !slices.Contains(allEndReasons, r) {
			t.Errorf("end reason %s is declared but not in allEndReasons", r)
		}
	}
	if len(states) != len(allStates) || len(reasons) != len(allEndReasons) {
		t.Errorf("state.go declares %d states and %d end reasons; allStates has %d, allEndReasons %d", len(states), len(reasons), len(allStates), len(allEndReasons))
	}
	for _, s := range allStates {
		if _, ok := transitions[s]; !ok {
			t.Errorf("state %s has no row in transitions", s)
		}
	}
	for _, r := range allEndReasons {
		found := false
		for _, s := range allStates {
			if slices.Contains(endReasons[s], r) {
				found = true
			}
		}
		if !found {
			t.Errorf("no state may end with reason %s", r)
		}
	}
}

// TestStateChangesGoThroughTheTable fails when code outside this package
// sets a record's state or end reason by hand (an assignment of a
// sandbox.State... or sandbox.End... constant to a .State or .EndReason
// field, or a sandbox.Record literal that names State or EndReason): such a
// change would skip the table. Tests may build records as they like.
func TestStateChangesGoThroughTheTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path == filepath.Join(root, "internal", "sandbox") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				return err
			}
			found = append(found, handSetStates(fset, f)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, where := range found {
		t.Errorf("%s: a record's state set by hand; use Record.Move or Record.End", where)
	}
}

// handSetStates lists where f sets a state or end reason by hand.
func handSetStates(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "State" && sel.Sel.Name != "EndReason") || i >= len(n.Rhs) {
					continue
				}
				if isSandboxConst(n.Rhs[i]) {
					out = append(out, fset.Position(n.Pos()).String())
				}
			}
		case *ast.CompositeLit:
			if !isSandboxRecord(n.Type) {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "State" || k.Name == "EndReason") {
					out = append(out, fset.Position(kv.Pos()).String())
				}
			}
		}
		return true
	})
	return out
}

// isSandboxConst reports whether e is sandbox.State... or sandbox.End....
func isSandboxConst(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sandbox" && (strings.HasPrefix(sel.Sel.Name, "State") || strings.HasPrefix(sel.Sel.Name, "End"))
}

// isSandboxRecord reports whether e is the type sandbox.Record.
func isSandboxRecord(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sandbox" && sel.Sel.Name == "Record"
}

// declaredConsts returns the values of the constants file declares with
// an explicit type, by their type's name.
func declaredConsts(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: a %s constant that is not a literal", file, typ.Name)
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[typ.Name] = append(out[typ.Name], value)
			}
		}
	}
	return out
}
