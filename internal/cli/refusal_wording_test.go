package cli

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestRefusalsNameAThing: the first argument of every refusal (cmdutil.Refuse,
// RefuseUsage, ext.Unsafe) names the thing refused, as a noun phrase that reads after
// "refusing " ("a spawn outside a project"), never an action in -ing form ("refusing
// spawning outside a project"). Literals and the leading literal of a concatenation or
// fmt.Sprintf are checked.
func TestRefusalsNameAThing(t *testing.T) {
	checked := 0
	inspectCommands(t, func(fset *token.FileSet, n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if name := calleeName(call); name != "Refuse" && name != "RefuseUsage" && name != "Unsafe" {
			return true
		}
		if lit := leadingLiteral(call.Args[0]); lit != "" {
			checked++
			if first, _, _ := strings.Cut(lit, " "); strings.HasSuffix(first, "ing") {
				t.Errorf("%s: refusing %q...: name the thing refused, not an action", fset.Position(call.Pos()), lit)
			}
		}
		return true
	})
	if checked < 50 {
		t.Fatalf("only %d refusals checked: the walk missed the commands", checked)
	}
}

// leadingLiteral is the string literal an expression starts with: the literal itself, the
// left end of a concatenation, or a fmt.Sprintf format; "" when there is none.
func leadingLiteral(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil {
			return s
		}
	case *ast.BinaryExpr:
		return leadingLiteral(e.X)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
			return leadingLiteral(e.Args[0])
		}
	}
	return ""
}
