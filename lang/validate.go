package lang

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

// Validation is what the validator answers for a program: the refusals that
// stop it running and the warnings that never block.
type Validation struct {
	Problems []Problem `json:"problems"`
	Warnings []Problem `json:"warnings,omitempty"`
}

// OK reports whether the program was accepted.
func (v Validation) OK() bool { return len(v.Problems) == 0 }

// Codes returns the distinct refusal codes, in order of first appearance.
func (v Validation) Codes() []string { return codesOf(v.Problems) }

// Validate checks a program against the admitted syntax table and the static
// rules of the language (LANG §2–§3, §6.2–§6.8, §7.7), collecting every
// refusal before answering.
func Validate(source string) Validation {
	p, perr := parse(source)
	if perr != nil {
		return Validation{Problems: []Problem{*perr}}
	}
	return validateParsed(p)
}

func validateParsed(p *parsed) Validation {
	v := &validator{p: p}
	top := &fnCtx{async: true, top: true}
	s := v.newScope(nil, top)
	v.statements(p.body, s)
	sort.SliceStable(v.problems, func(i, j int) bool {
		a, b := v.problems[i], v.problems[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return Validation{Problems: dedupe(v.problems), Warnings: dedupe(v.warnings)}
}

func dedupe(ps []Problem) []Problem {
	type k struct {
		code      string
		line, col int
	}
	seen := map[k]bool{}
	out := ps[:0]
	for _, p := range ps {
		if seen[k{p.Code, p.Line, p.Column}] {
			continue
		}
		seen[k{p.Code, p.Line, p.Column}] = true
		out = append(out, p)
	}
	return out
}

type fnCtx struct {
	async  bool
	top    bool
	branch int // the concurrent branch this function's body belongs to; 0 outside every branch
}

type binding struct {
	kind    string // const, let, function, param, catch
	declEnd int    // goja index after which a let/const is initialized
	async   bool   // bound to an async function
	fn      *fnCtx
}

type scope struct {
	parent *scope
	fn     *fnCtx
	names  map[string]*binding
}

type validator struct {
	p          *parsed
	problems   []Problem
	warnings   []Problem
	nextBranch int
}

func (v *validator) newScope(parent *scope, fn *fnCtx) *scope {
	return &scope{parent: parent, fn: fn, names: map[string]*binding{}}
}

func (v *validator) refuse(code string, idx file, msg, fix string) {
	v.problems = append(v.problems, v.p.problemAt(code, int(idx), msg, fix))
}

func (v *validator) warn(code string, idx file, msg, fix string) {
	pr := v.p.problemAt(code, int(idx), msg, fix)
	pr.Warning = true
	v.warnings = append(v.warnings, pr)
}

type file = int

func idx0(n ast.Node) file { return int(n.Idx0()) }

func (s *scope) lookup(name string) *binding {
	for c := s; c != nil; c = c.parent {
		if b, ok := c.names[name]; ok {
			return b
		}
	}
	return nil
}

// declare binds name in s, refusing a reserved name (L2002).
func (v *validator) declare(s *scope, id *ast.Identifier, kind string, declEnd file, async bool) {
	name := id.Name.String()
	if isReserved(name) {
		v.refuse("L2002", int(id.Idx), fmt.Sprintf("%q is a reserved name (a primitive or a builtin) and cannot be redeclared", name), "choose another name")
		return
	}
	s.names[name] = &binding{kind: kind, declEnd: declEnd, async: async, fn: s.fn}
}

// hoist pre-declares the let, const and function declarations of a statement
// list: they bind their whole block (LANG §3).
func (v *validator) hoist(list []ast.Statement, s *scope) {
	for _, st := range list {
		switch d := st.(type) {
		case *ast.LexicalDeclaration:
			kind := "let"
			if d.Token == token.CONST {
				kind = "const"
			}
			for _, b := range d.List {
				async := false
				if kind == "const" {
					async = isAsyncFn(b.Initializer)
				}
				for _, id := range patternNames(b.Target) {
					v.declare(s, id, kind, int(b.Idx1()), async)
				}
			}
		case *ast.FunctionDeclaration:
			if d.Function.Name != nil {
				v.declare(s, d.Function.Name, "function", 0, d.Function.Async)
			}
		}
	}
}

func isAsyncFn(e ast.Expression) bool {
	switch f := e.(type) {
	case *ast.FunctionLiteral:
		return f.Async
	case *ast.ArrowFunctionLiteral:
		return f.Async
	}
	return false
}

// patternNames lists the identifiers a binding target declares.
func patternNames(t ast.Expression) []*ast.Identifier {
	var out []*ast.Identifier
	var walk func(e ast.Expression)
	walk = func(e ast.Expression) {
		switch x := e.(type) {
		case *ast.Identifier:
			out = append(out, x)
		case *ast.ObjectPattern:
			for _, pr := range x.Properties {
				switch q := pr.(type) {
				case *ast.PropertyShort:
					n := q.Name
					out = append(out, &n)
				case *ast.PropertyKeyed:
					walk(q.Value)
				}
			}
			if x.Rest != nil {
				walk(x.Rest)
			}
		case *ast.ArrayPattern:
			for _, el := range x.Elements {
				if el != nil {
					walk(el)
				}
			}
			if x.Rest != nil {
				walk(x.Rest)
			}
		case *ast.AssignExpression:
			walk(x.Left)
		case *ast.Binding:
			walk(x.Target)
		}
	}
	walk(t)
	return out
}

func (v *validator) statements(list []ast.Statement, s *scope) {
	v.hoist(list, s)
	for i, st := range list {
		v.statement(st, s)
		if r, ok := st.(*ast.ReturnStatement); ok && r.Argument == nil && i+1 < len(list) {
			if next, ok := list[i+1].(*ast.ExpressionStatement); ok {
				v.refuse("L1008", idx0(next), "a value after a bare return is not returned: the return ended on the line above", "put the value on the return's line")
			}
		}
	}
}

func (v *validator) block(b *ast.BlockStatement, s *scope) {
	v.statements(b.List, v.newScope(s, s.fn))
}

// body checks a loop or if body, refusing an unbraced one (L1009).
func (v *validator) body(st ast.Statement, s *scope, what string) {
	if b, ok := st.(*ast.BlockStatement); ok {
		v.block(b, s)
		return
	}
	v.refuse("L1009", idx0(st), "the body of "+what+" is not braced", "wrap it in { }")
	v.statement(st, v.newScope(s, s.fn))
}

func (v *validator) statement(st ast.Statement, s *scope) {
	switch x := st.(type) {
	case *ast.ExpressionStatement:
		v.expr(x.Expression, s, false)
	case *ast.LexicalDeclaration:
		for _, b := range x.List {
			if b.Initializer != nil {
				v.expr(b.Initializer, s, false)
			} else if x.Token == token.CONST {
				v.refuse("L1029", idx0(b), "a const declaration needs a value", "write const name = value")
			}
			v.pattern(b.Target, s, false)
		}
	case *ast.FunctionDeclaration:
		v.function(x.Function, s, 0)
	case *ast.BlockStatement:
		v.block(x, s)
	case *ast.IfStatement:
		v.expr(x.Test, s, false)
		v.body(x.Consequent, s, "if")
		if x.Alternate != nil {
			if _, ok := x.Alternate.(*ast.IfStatement); ok {
				v.statement(x.Alternate, s)
			} else {
				v.body(x.Alternate, s, "else")
			}
		}
	case *ast.WhileStatement:
		v.expr(x.Test, s, false)
		v.body(x.Body, s, "while")
	case *ast.ForStatement:
		ls := v.newScope(s, s.fn)
		switch in := x.Initializer.(type) {
		case *ast.ForLoopInitializerLexicalDecl:
			v.statement(&in.LexicalDeclaration, ls)
			v.hoist([]ast.Statement{&in.LexicalDeclaration}, ls)
		case *ast.ForLoopInitializerExpression:
			v.expr(in.Expression, ls, false)
		case *ast.ForLoopInitializerVarDeclList:
			v.refuse("L1003", int(in.Var), "var is not part of the language", "const, or let when reassigned")
		}
		if x.Test != nil {
			v.expr(x.Test, ls, false)
		}
		if x.Update != nil {
			v.expr(x.Update, ls, false)
		}
		v.body(x.Body, ls, "for")
	case *ast.ForOfStatement:
		v.expr(x.Source, s, false)
		ls := v.newScope(s, s.fn)
		switch in := x.Into.(type) {
		case *ast.ForDeclaration:
			kind := "let"
			if in.IsConst {
				kind = "const"
			}
			for _, id := range patternNames(in.Target) {
				v.declare(ls, id, kind, 0, false)
			}
			v.pattern(in.Target, ls, false)
		case *ast.ForIntoExpression:
			v.assignTarget(in.Expression, s)
		case *ast.ForIntoVar:
			v.refuse("L1003", idx0(in.Binding), "var is not part of the language", "const, or let when reassigned")
		}
		v.body(x.Body, ls, "for...of")
	case *ast.ForInStatement:
		v.refuse("L1004", int(x.For), "for...in is not part of the language", "for (const k of keys(record))")
	case *ast.DoWhileStatement:
		v.refuse("L1022", int(x.Do), "do...while is not part of the language", "while or for")
	case *ast.ReturnStatement:
		if s.fn.top {
			v.refuse("L1024", int(x.Return), "a program does not return: top-level return is refused", "log(...), or publish the result through an effect")
		}
		if x.Argument != nil {
			v.expr(x.Argument, s, true)
		}
	case *ast.BranchStatement:
		if x.Label != nil {
			v.refuse("L1017", int(x.Idx), "labelled break and continue are not part of the language", "a helper function or a flag")
		}
	case *ast.ThrowStatement:
		v.expr(x.Argument, s, false)
	case *ast.TryStatement:
		v.block(x.Body, s)
		if x.Catch != nil {
			cs := v.newScope(s, s.fn)
			if x.Catch.Parameter != nil {
				for _, id := range patternNames(x.Catch.Parameter) {
					v.declare(cs, id, "catch", 0, false)
				}
				v.pattern(x.Catch.Parameter, cs, false)
			}
			v.block(x.Catch.Body, cs)
		}
		if x.Finally != nil {
			v.block(x.Finally, s)
		}
	case *ast.SwitchStatement:
		v.expr(x.Discriminant, s, false)
		ss := v.newScope(s, s.fn)
		var all []ast.Statement
		for _, c := range x.Body {
			all = append(all, c.Consequent...)
		}
		v.hoist(all, ss)
		for _, c := range x.Body {
			if c.Test != nil {
				v.expr(c.Test, ss, false)
			}
			for _, st := range c.Consequent {
				v.statement(st, ss)
			}
			if len(c.Consequent) > 0 && !terminates(c.Consequent[len(c.Consequent)-1]) {
				v.refuse("L1010", int(c.Case), "this case falls through into the next one", "end each case with return, break, continue or throw")
			}
		}
	case *ast.EmptyStatement:
	case *ast.VariableStatement:
		v.refuse("L1003", int(x.Var), "var is not part of the language", "const, or let when reassigned")
	case *ast.ClassDeclaration:
		v.refuse("L1001", idx0(x), "class is not part of the language", "records and functions")
	case *ast.LabelledStatement:
		v.refuse("L1017", idx0(x), "labels are not part of the language", "a helper function or a flag")
		v.statement(x.Statement, s)
	case *ast.WithStatement:
		v.refuse("L1013", int(x.With), "with is not part of the language", "name the record")
	case *ast.DebuggerStatement:
		v.refuse("L1029", int(x.Debugger), "debugger is not part of the language", "remove it")
	default:
		v.refuse("L1029", idx0(st), fmt.Sprintf("this statement (%T) is not part of the language", st), "write only the syntax the language admits (LANG §2.2)")
	}
}

func terminates(st ast.Statement) bool {
	switch st.(type) {
	case *ast.ReturnStatement, *ast.ThrowStatement, *ast.BranchStatement:
		return true
	}
	return false
}

// pattern checks a binding pattern: its defaults are expressions, its keys are
// literal (L1011) and never __proto__ (L1028).
func (v *validator) pattern(t ast.Expression, s *scope, _ bool) {
	switch x := t.(type) {
	case *ast.Identifier:
	case *ast.ObjectPattern:
		for _, pr := range x.Properties {
			switch q := pr.(type) {
			case *ast.PropertyShort:
				v.propName(q.Name.Name.String(), int(q.Name.Idx))
				if q.Initializer != nil {
					v.expr(q.Initializer, s, false)
				}
			case *ast.PropertyKeyed:
				v.propKey(q, s)
				v.pattern(q.Value, s, false)
			}
		}
		if x.Rest != nil {
			v.pattern(x.Rest, s, false)
		}
	case *ast.ArrayPattern:
		for _, el := range x.Elements {
			if el != nil {
				v.pattern(el, s, false)
			}
		}
		if x.Rest != nil {
			v.pattern(x.Rest, s, false)
		}
	case *ast.AssignExpression:
		v.pattern(x.Left, s, false)
		v.expr(x.Right, s, false)
	case *ast.Binding:
		v.pattern(x.Target, s, false)
		if x.Initializer != nil {
			v.expr(x.Initializer, s, false)
		}
	default:
		// An assignment pattern may hold a member target.
		v.assignTarget(t, s)
	}
}

func (v *validator) propName(name string, idx int) {
	if name == "__proto__" {
		v.refuse("L1028", idx, "the property name __proto__ is refused", "another name")
	}
}

func (v *validator) propKey(q *ast.PropertyKeyed, s *scope) {
	if q.Computed {
		v.refuse("L1011", idx0(q.Key), "a computed property key is not part of the language", "a literal key, merge, or record[k] = v")
		v.expr(q.Key, s, false)
		return
	}
	switch k := q.Key.(type) {
	case *ast.StringLiteral:
		v.propName(k.Value.String(), int(k.Idx))
	case *ast.Identifier:
		v.propName(k.Name.String(), int(k.Idx))
	}
}

// function checks a function literal's parameters and body in a new frame.
// branch is the concurrent branch its body belongs to (0: inherit).
func (v *validator) function(f *ast.FunctionLiteral, s *scope, branch int) {
	if f.Generator {
		v.refuse("L1005", int(f.Function), "generators are not part of the language", "a loop with await inside it")
	}
	fn := &fnCtx{async: f.Async, branch: s.fn.branch}
	if branch != 0 {
		fn.branch = branch
	}
	fs := v.newScope(s, fn)
	if f.Name != nil && fs.lookup(f.Name.Name.String()) == nil {
		// A named function expression binds its own name in its body.
		v.declare(fs, f.Name, "function", 0, f.Async)
	}
	v.params(f.ParameterList, fs)
	v.statements(f.Body.List, fs)
}

func (v *validator) params(pl *ast.ParameterList, fs *scope) {
	for _, b := range pl.List {
		if b.Initializer != nil {
			v.expr(b.Initializer, fs, false)
		}
		for _, id := range patternNames(b.Target) {
			v.declare(fs, id, "param", 0, false)
		}
		v.pattern(b.Target, fs, false)
	}
	if pl.Rest != nil {
		for _, id := range patternNames(pl.Rest) {
			v.declare(fs, id, "param", 0, false)
		}
	}
}

func (v *validator) arrow(f *ast.ArrowFunctionLiteral, s *scope, branch int, conciseAwaited bool) {
	fn := &fnCtx{async: f.Async, branch: s.fn.branch}
	if branch != 0 {
		fn.branch = branch
	}
	fs := v.newScope(s, fn)
	v.params(f.ParameterList, fs)
	switch b := f.Body.(type) {
	case *ast.BlockStatement:
		v.statements(b.List, fs)
	case *ast.ExpressionBody:
		v.expr(b.Expression, fs, conciseAwaited)
	}
}

// branchFn checks a function passed as a concurrent branch: its body is a new
// branch for L2032 (unless shared is set, as for conclave), and a concise body
// may be an effect call.
func (v *validator) branchFn(e ast.Expression, s *scope, shared bool) {
	id := 0
	if !shared {
		v.nextBranch++
		id = v.nextBranch
	}
	switch f := e.(type) {
	case *ast.ArrowFunctionLiteral:
		v.arrow(f, s, id, true)
	case *ast.FunctionLiteral:
		v.function(f, s, id)
	default:
		v.expr(e, s, false)
	}
}

// ident checks a reference to a name.
func (v *validator) ident(id *ast.Identifier, s *scope) {
	name := id.Name.String()
	if name == "await" {
		v.refuse("L1023", int(id.Idx), "await is used outside an async function", "mark the function async")
		return
	}
	b := s.lookup(name)
	if b == nil {
		switch {
		case isReserved(name):
		case name == "Promise":
			v.refuse("L2011", int(id.Idx), "the Promise API is not available: concurrency is parallel, race, fanOut and conclave", "parallel, race or fanOut")
		case hostGlobals[name] != "":
			v.refuse("L2012", int(id.Idx), fmt.Sprintf("the host global %s is not available", name), hostGlobals[name])
		case hostGlobalsBare[name]:
			v.refuse("L2012", int(id.Idx), fmt.Sprintf("the host global %s is not available", name), "none: the language has no replacement")
		default:
			v.refuse("L2001", int(id.Idx), fmt.Sprintf("%s is not declared", name), "declare it with const or let, or correct the spelling")
		}
		return
	}
	if (b.kind == "let" || b.kind == "const") && b.fn == s.fn && int(id.Idx) < b.declEnd {
		v.refuse("L2004", int(id.Idx), fmt.Sprintf("%s is used before its declaration", name), "move the declaration above its first use")
	}
}

// assignTarget checks the left side of an assignment or update.
func (v *validator) assignTarget(e ast.Expression, s *scope) {
	switch x := e.(type) {
	case *ast.Identifier:
		v.ident(x, s)
		name := x.Name.String()
		b := s.lookup(name)
		if b == nil {
			if isReserved(name) {
				v.refuse("L2003", int(x.Idx), fmt.Sprintf("%s is a reserved name and cannot be assigned", name), "declare a binding of your own")
			}
			return
		}
		switch b.kind {
		case "const", "function", "catch":
			v.refuse("L2003", int(x.Idx), fmt.Sprintf("%s is bound by %s and cannot be reassigned", name, b.kind), "declare it with let")
		}
		if b.fn.branch != s.fn.branch {
			v.refuse("L2032", int(x.Idx), fmt.Sprintf("a concurrent branch writes %s, which is declared outside it", name), "return the value from the branch and read it from the scope's result")
		}
	case *ast.ObjectPattern, *ast.ArrayPattern:
		for _, id := range patternNames(x) {
			v.assignTarget(id, s)
		}
		v.pattern(x, s, false)
	case *ast.DotExpression, *ast.BracketExpression:
		v.expr(e, s, false)
		if root := memberRoot(e); root != nil {
			if b := s.lookup(root.Name.String()); b != nil && b.fn.branch != s.fn.branch {
				v.refuse("L2032", int(root.Idx), fmt.Sprintf("a concurrent branch writes into %s, which is declared outside it", root.Name), "return the value from the branch and read it from the scope's result")
			}
		}
	default:
		v.expr(e, s, false)
	}
}

func memberRoot(e ast.Expression) *ast.Identifier {
	for {
		switch x := e.(type) {
		case *ast.DotExpression:
			e = x.Left
		case *ast.BracketExpression:
			e = x.Left
		case *ast.Identifier:
			return x
		default:
			return nil
		}
	}
}

var binaryAdmitted = map[token.Token]bool{
	token.STRICT_EQUAL: true, token.STRICT_NOT_EQUAL: true, token.LESS: true, token.LESS_OR_EQUAL: true,
	token.GREATER: true, token.GREATER_OR_EQUAL: true, token.PLUS: true, token.MINUS: true, token.MULTIPLY: true,
	token.SLASH: true, token.REMAINDER: true, token.EXPONENT: true, token.AND: true, token.OR: true,
	token.EXCLUSIVE_OR: true, token.SHIFT_LEFT: true, token.SHIFT_RIGHT: true, token.UNSIGNED_SHIFT_RIGHT: true,
	token.LOGICAL_AND: true, token.LOGICAL_OR: true, token.COALESCE: true,
}

// expr checks an expression. awaited is set where an effect call may stand:
// the operand of await or return, or a branch's concise body (L2013).
func (v *validator) expr(e ast.Expression, s *scope, awaited bool) {
	switch x := e.(type) {
	case nil:
	case *ast.Identifier:
		v.ident(x, s)
	case *ast.NullLiteral, *ast.BooleanLiteral, *ast.StringLiteral:
	case *ast.NumberLiteral:
		if strings.HasSuffix(x.Literal, "n") {
			v.refuse("L1030", int(x.Idx), "a bigint literal is not part of the language", "a number, or a string")
		}
	case *ast.RegExpLiteral:
		v.refuse("L1007", int(x.Idx), "a regular expression literal is not part of the language", "contains, startsWith, endsWith, split")
	case *ast.TemplateLiteral:
		if x.Tag != nil {
			v.refuse("L1018", idx0(x), "a tagged template is not part of the language", "a plain template literal")
			v.expr(x.Tag, s, false)
		}
		for _, ex := range x.Expressions {
			v.expr(ex, s, false)
		}
	case *ast.ArrayLiteral:
		for _, el := range x.Value {
			if el == nil {
				v.refuse("L1012", int(x.LeftBracket), "an array literal has an elision (a hole)", "write the value, or null")
				continue
			}
			v.expr(el, s, false)
		}
	case *ast.ObjectLiteral:
		for _, pr := range x.Value {
			switch q := pr.(type) {
			case *ast.PropertyKeyed:
				if q.Kind == ast.PropertyKindGet || q.Kind == ast.PropertyKindSet {
					v.refuse("L1015", idx0(q), "getters and setters are not part of the language", "store the value, or call a function")
				}
				v.propKey(q, s)
				v.expr(q.Value, s, false)
			case *ast.PropertyShort:
				v.propName(q.Name.Name.String(), int(q.Name.Idx))
				n := q.Name
				v.ident(&n, s)
				if q.Initializer != nil {
					v.refuse("L1029", int(q.Name.Idx), "a shorthand property cannot carry a default outside a pattern", "write key: value")
				}
			case *ast.SpreadElement:
				v.expr(q.Expression, s, false)
			default:
				v.refuse("L1029", idx0(pr), "this property form is not part of the language", "write key: value")
			}
		}
	case *ast.SpreadElement:
		v.expr(x.Expression, s, false)
	case *ast.DotExpression:
		v.expr(x.Left, s, false)
		v.propName(x.Identifier.Name.String(), int(x.Identifier.Idx))
	case *ast.BracketExpression:
		v.expr(x.Left, s, false)
		v.expr(x.Member, s, false)
		v.lineOpens(int(x.LeftBracket), x.Left, "[")
		if sl, ok := x.Member.(*ast.StringLiteral); ok {
			v.propName(sl.Value.String(), int(sl.Idx))
		}
	case *ast.OptionalChain:
		v.expr(x.Expression, s, awaited)
	case *ast.Optional:
		v.expr(x.Expression, s, awaited)
	case *ast.UnaryExpression:
		switch x.Operator {
		case token.DELETE:
			v.refuse("L1021", int(x.Idx), "delete is not part of the language", "build a new record")
		case token.VOID:
			v.refuse("L1027", int(x.Idx), "void is not part of the language", "undefined, or drop the expression")
		case token.INCREMENT, token.DECREMENT:
			v.assignTarget(x.Operand, s)
			return
		case token.NOT, token.MINUS, token.PLUS, token.BITWISE_NOT, token.TYPEOF:
		default:
			v.refuse("L1029", int(x.Idx), "this unary operator is not part of the language", "write only the syntax the language admits (LANG §2.2)")
		}
		v.expr(x.Operand, s, false)
	case *ast.BinaryExpression:
		switch {
		case x.Operator == token.EQUAL || x.Operator == token.NOT_EQUAL:
			v.refuse("L1025", idx0(x), "loose equality is not part of the language", "===, !==, ??, === null")
		case x.Operator == token.INSTANCEOF:
			v.refuse("L1016", idx0(x), "instanceof is not part of the language", "compare a field")
		case x.Operator == token.IN:
			v.refuse("L1004", idx0(x), "the in operator is not part of the language", "has(record, key)")
		case !binaryAdmitted[x.Operator]:
			v.refuse("L1029", idx0(x), "this operator is not part of the language", "write only the syntax the language admits (LANG §2.2)")
		}
		v.expr(x.Left, s, false)
		v.expr(x.Right, s, false)
	case *ast.ConditionalExpression:
		v.expr(x.Test, s, false)
		v.expr(x.Consequent, s, false)
		v.expr(x.Alternate, s, false)
	case *ast.AssignExpression:
		v.expr(x.Right, s, false)
		v.assignTarget(x.Left, s)
	case *ast.AwaitExpression:
		if !s.fn.async {
			v.refuse("L1023", int(x.Await), "await is used in a function that is not async", "mark the function async")
		}
		v.expr(x.Argument, s, true)
	case *ast.ArrowFunctionLiteral:
		v.arrow(x, s, 0, false)
	case *ast.FunctionLiteral:
		v.function(x, s, 0)
	case *ast.CallExpression:
		v.call(x, s, awaited)
	case *ast.SequenceExpression:
		v.refuse("L1026", idx0(x), "the comma operator is not part of the language", "one statement per expression")
		for _, ex := range x.Sequence {
			v.expr(ex, s, false)
		}
	case *ast.ThisExpression:
		v.refuse("L1002", int(x.Idx), "this is not part of the language", "records and functions")
	case *ast.NewExpression:
		v.refuse("L1019", int(x.New), "new is not part of the language", "records and functions")
	case *ast.SuperExpression:
		v.refuse("L1001", int(x.Idx), "super is not part of the language", "records and functions")
	case *ast.ClassLiteral:
		v.refuse("L1001", int(x.Class), "class is not part of the language", "records and functions")
	case *ast.MetaProperty:
		v.refuse("L1020", int(x.Idx), "new.target and import.meta are not part of the language", "one file; run() for run metadata")
	case *ast.YieldExpression:
		v.refuse("L1005", int(x.Yield), "yield is not part of the language", "a loop with await inside it")
	case *ast.ObjectPattern, *ast.ArrayPattern:
		v.pattern(x, s, false)
	default:
		v.refuse("L1029", idx0(e), fmt.Sprintf("this expression (%T) is not part of the language", e), "write only the syntax the language admits (LANG §2.2)")
	}
}

// lineOpens refuses a ( or [ that opens a line and continues the expression
// above it (L1008).
func (v *validator) lineOpens(at int, left ast.Expression, what string) {
	off := v.p.offset(at)
	lineStart := strings.LastIndexByte(v.p.src[:off], '\n') + 1
	if strings.TrimSpace(v.p.src[lineStart:off]) != "" {
		return
	}
	if v.p.offset(idx0(left)) < lineStart {
		v.refuse("L1008", at, "a line opening with "+what+" continues the statement above it", "end the statement above with ;, or join the lines")
	}
}

func (v *validator) call(x *ast.CallExpression, s *scope, awaited bool) {
	v.lineOpens(int(x.LeftParenthesis), x.Callee, "(")
	name := ""
	if id, ok := x.Callee.(*ast.Identifier); ok {
		name = id.Name.String()
	}
	sig, isEffect := effects[name]
	if isEffect && s.lookup(name) != nil {
		isEffect = false
	}
	if isEffect {
		v.ident(x.Callee.(*ast.Identifier), s)
		if !awaited {
			v.refuse("L2013", idx0(x), fmt.Sprintf("the effect %s(...) is not awaited", name), "await it, or run it as a branch of parallel, race or fanOut")
		}
		v.effectCall(x, name, sig, s)
		return
	}
	if name != "" {
		if b := s.lookup(name); b != nil && b.async && !awaited {
			v.refuse("L2013", idx0(x), fmt.Sprintf("the async function %s(...) is called without await", name), "await it, or run it as a branch of parallel, race or fanOut")
		}
	}
	v.expr(x.Callee, s, false)
	for _, a := range x.ArgumentList {
		v.expr(a, s, false)
	}
}

var (
	stepNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)
	kebabKeyRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	durationRE = regexp.MustCompile(`^([0-9]+)(ms|s|m|h|d)$`)
)

// checkStepName refuses a malformed step name (L3014, L3025).
func (v *validator) checkStepName(name string, at int, what string) {
	if strings.ContainsAny(name, "/#:") {
		v.refuse("L3025", at, fmt.Sprintf("%s %q contains /, # or :, which would forge a step key", what, name), "use a kebab-case token")
	}
	if !stepNameRE.MatchString(name) {
		v.refuse("L3014", at, fmt.Sprintf("%s %q is not a kebab-case token of 1 to 64 characters", what, name), "lower-case letters, digits and -, e.g. \"review-1\"")
	}
}

// effectCall checks an effect primitive's call shape (LANG §6.2, §6.3, §6.8).
func (v *validator) effectCall(x *ast.CallExpression, name string, sig effectSig, s *scope) {
	args := x.ArgumentList
	for i, a := range args {
		switch {
		case (name == "parallel" || name == "race") && i == 0:
			v.branches(a, s, name)
		case (name == "fanOut" || name == "conclave") && i == 1:
			v.branchFn(a, s, name == "conclave")
		default:
			v.expr(a, s, false)
		}
	}
	var bag *ast.ObjectLiteral
	bagPresent := len(args) > sig.bagIndex
	if bagPresent {
		bag, _ = args[sig.bagIndex].(*ast.ObjectLiteral)
	}
	fields := map[string]ast.Expression{}
	if bag != nil {
		for _, pr := range bag.Value {
			key, val := "", ast.Expression(nil)
			switch q := pr.(type) {
			case *ast.PropertyKeyed:
				if !q.Computed {
					key = propKeyName(q.Key)
				}
				val = q.Value
			case *ast.PropertyShort:
				key, val = q.Name.Name.String(), &q.Name
			}
			if key == "" {
				continue
			}
			if !sig.keys[key] {
				p := v.p.problemAt("L3011", idx0(pr), fmt.Sprintf("%s has no option %q", name, key), "the options are listed in the signature")
				p.Callee = sig.signature
				v.problems = append(v.problems, p)
				continue
			}
			fields[key] = val
		}
	}
	at := idx0(x)
	switch sig.nameRule {
	case nameRequired:
		switch {
		case fields["name"] == nil:
			p := v.p.problemAt("L3012", at, fmt.Sprintf("%s needs a step name", name), "add name: \"a-kebab-name\" to its options")
			p.Callee = sig.signature
			v.problems = append(v.problems, p)
		default:
			if sl, ok := fields["name"].(*ast.StringLiteral); ok {
				v.checkStepName(sl.Value.String(), int(sl.Idx), "the step name")
			} else {
				v.refuse("L3013", idx0(fields["name"]), fmt.Sprintf("the step name of %s must be a string literal", name), "write the name as a literal string")
			}
		}
	case namePositional:
		switch {
		case len(args) == 0:
			p := v.p.problemAt("L3012", at, "checkpoint needs a step name as its first argument", "checkpoint(\"approve\", \"prompt\", { ... })")
			p.Callee = sig.signature
			v.problems = append(v.problems, p)
		default:
			if sl, ok := args[0].(*ast.StringLiteral); ok {
				v.checkStepName(sl.Value.String(), int(sl.Idx), "the step name")
			} else {
				v.refuse("L3013", idx0(args[0]), "the step name of checkpoint must be a string literal", "write the name as a literal string")
			}
		}
	case nameOptional:
		if sl, ok := fields["name"].(*ast.StringLiteral); ok {
			v.checkStepName(sl.Value.String(), int(sl.Idx), "the step name")
		}
	}
	switch name {
	case "checkpoint":
		if to, ok := fields["to"]; ok {
			if sl, ok := fields["onExpiry"].(*ast.StringLiteral); !ok || sl.Value.String() != "escalate" {
				v.refuse("L3044", idx0(to), "to is legal only with onExpiry: \"escalate\"", "add onExpiry: \"escalate\", or drop to")
			}
		}
	case "notify":
		if len(args) > 1 {
			if lit, ok := args[1].(*ast.ObjectLiteral); ok {
				if msg := checkFactLiteral(lit); msg != "" {
					v.refuse("L3043", idx0(lit), "the notify fact is not a bounded decision record: "+msg, "{ decision: \"step-name\", outcome: \"token\", detail?: { up to 8 kebab keys: number, boolean or one-line string ≤128 } }")
				}
			}
		}
	case "waitUntil":
		if len(args) > 0 {
			switch args[0].(type) {
			case *ast.ArrowFunctionLiteral, *ast.FunctionLiteral, *ast.Identifier, *ast.DotExpression, *ast.BracketExpression, *ast.CallExpression, *ast.ConditionalExpression:
			default:
				v.refuse("L3045", idx0(args[0]), "the waitUntil probe is not a function", "pass a function: () => probeSomething()")
			}
		} else {
			v.refuse("L3045", at, "waitUntil needs a probe function", "waitUntil(() => probe(), { name, every, deadline })")
		}
		if bag != nil || !bagPresent {
			every, deadline := fields["every"], fields["deadline"]
			if every == nil || deadline == nil {
				v.refuse("L3046", at, "waitUntil needs both every (its cadence) and deadline", "add every: \"30s\" and deadline: \"1h\"")
			} else {
				e, eok := literalDuration(every)
				d, dok := literalDuration(deadline)
				if eok && e == 0 || eok && dok && e > d {
					v.refuse("L3047", idx0(every), "the waitUntil cadence is zero or longer than its deadline", "a cadence shorter than the deadline")
				}
			}
		}
	case "spawn":
		if pl, ok := fields["placement"]; ok {
			if !literalPlacement(pl) {
				v.refuse("L3048", idx0(pl), "placement must be a literal { endpoint, instanceId } pair of strings", "placement: { endpoint: \"manager\", instanceId: \"...\" }")
			}
		}
	case "fanOut":
		if fields["key"] == nil && len(args) > 0 {
			if arr, ok := args[0].(*ast.ArrayLiteral); ok && !itemsCarryID(arr) {
				v.warn("L3021", idx0(arr), "fanOut over a literal list whose items carry no id and no key option", "add key: item => item, or give each item an id")
			}
		}
	}
}

func propKeyName(k ast.Expression) string {
	switch x := k.(type) {
	case *ast.Identifier:
		return x.Name.String()
	case *ast.StringLiteral:
		return x.Value.String()
	}
	return ""
}

// branches checks the branches argument of parallel or race: a record or an
// array of thunks, each its own concurrent branch.
func (v *validator) branches(a ast.Expression, s *scope, name string) {
	switch x := a.(type) {
	case *ast.ObjectLiteral:
		for _, pr := range x.Value {
			if q, ok := pr.(*ast.PropertyKeyed); ok {
				v.propKey(q, s)
				if k := propKeyName(q.Key); k != "" && !q.Computed && strings.ContainsAny(k, "/#:") {
					v.refuse("L3025", idx0(q.Key), fmt.Sprintf("the branch key %q contains /, # or :", k), "use a kebab-case key")
				}
				v.branchFn(q.Value, s, false)
				continue
			}
			v.expr(pr, s, false)
		}
	case *ast.ArrayLiteral:
		v.warn("L3023", int(x.LeftBracket), name+" branches written as an array are keyed by index: inserting one shifts every later branch", "write the branches as a record of named thunks")
		for _, el := range x.Value {
			if el == nil {
				v.refuse("L1012", int(x.LeftBracket), "an array literal has an elision (a hole)", "write the value, or null")
				continue
			}
			v.branchFn(el, s, false)
		}
	default:
		v.expr(a, s, false)
	}
}

func itemsCarryID(arr *ast.ArrayLiteral) bool {
	if len(arr.Value) == 0 {
		return false
	}
	for _, el := range arr.Value {
		obj, ok := el.(*ast.ObjectLiteral)
		if !ok {
			return false
		}
		found := false
		for _, pr := range obj.Value {
			if q, ok := pr.(*ast.PropertyKeyed); ok && !q.Computed && propKeyName(q.Key) == "id" {
				_, found = q.Value.(*ast.StringLiteral)
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func literalDuration(e ast.Expression) (int64, bool) {
	sl, ok := e.(*ast.StringLiteral)
	if !ok {
		return 0, false
	}
	ms, err := ParseDuration(sl.Value.String())
	return ms, err == nil
}

func literalPlacement(e ast.Expression) bool {
	obj, ok := e.(*ast.ObjectLiteral)
	if !ok || len(obj.Value) != 2 {
		return false
	}
	seen := map[string]bool{}
	for _, pr := range obj.Value {
		q, ok := pr.(*ast.PropertyKeyed)
		if !ok || q.Computed {
			return false
		}
		k := propKeyName(q.Key)
		if _, ok := q.Value.(*ast.StringLiteral); !ok || (k != "endpoint" && k != "instanceId") {
			return false
		}
		seen[k] = true
	}
	return seen["endpoint"] && seen["instanceId"]
}

// checkFactLiteral checks a literal notify fact exactly where its parts are
// literal; a computed part is checked at the effect boundary.
func checkFactLiteral(obj *ast.ObjectLiteral) string {
	seen := map[string]bool{}
	for _, pr := range obj.Value {
		q, ok := pr.(*ast.PropertyKeyed)
		if !ok || q.Computed {
			if _, short := pr.(*ast.PropertyShort); short {
				seen[pr.(*ast.PropertyShort).Name.Name.String()] = true
				continue
			}
			return "it may hold only decision, outcome and detail"
		}
		k := propKeyName(q.Key)
		seen[k] = true
		switch k {
		case "decision", "outcome":
			if sl, ok := q.Value.(*ast.StringLiteral); ok && !stepNameRE.MatchString(sl.Value.String()) {
				return k + " must be a step-name token"
			}
			if isNonStringLiteral(q.Value) {
				return k + " must be a step-name token"
			}
		case "detail":
			d, ok := q.Value.(*ast.ObjectLiteral)
			if !ok {
				if isNonStringLiteral(q.Value) {
					return "detail must be a record"
				}
				continue
			}
			if len(d.Value) > 8 {
				return "detail holds more than 8 keys"
			}
			for _, dp := range d.Value {
				dq, ok := dp.(*ast.PropertyKeyed)
				if !ok {
					if _, short := dp.(*ast.PropertyShort); short {
						continue
					}
					return "detail may not spread"
				}
				if dq.Computed {
					return "detail keys must be literal"
				}
				if !kebabKeyRE.MatchString(propKeyName(dq.Key)) {
					return fmt.Sprintf("detail key %q is not a kebab-case token of at most 32 characters", propKeyName(dq.Key))
				}
				switch val := dq.Value.(type) {
				case *ast.StringLiteral:
					if msg := checkDetailString(val.Value.String()); msg != "" {
						return msg
					}
				case *ast.NumberLiteral:
					if f, ok := val.Value.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
						return "a detail number must be finite"
					}
				case *ast.BooleanLiteral:
				case *ast.NullLiteral, *ast.ObjectLiteral, *ast.ArrayLiteral, *ast.ArrowFunctionLiteral, *ast.FunctionLiteral:
					return "a detail value must be a finite number, a boolean or a one-line string"
				}
			}
		default:
			return fmt.Sprintf("%q is not a field of a decision record", k)
		}
	}
	if !seen["decision"] || !seen["outcome"] {
		return "decision and outcome are required"
	}
	return ""
}

func isNonStringLiteral(e ast.Expression) bool {
	switch e.(type) {
	case *ast.NumberLiteral, *ast.BooleanLiteral, *ast.NullLiteral, *ast.ObjectLiteral, *ast.ArrayLiteral, *ast.ArrowFunctionLiteral, *ast.FunctionLiteral:
		return true
	}
	return false
}

func checkDetailString(s string) string {
	if len([]rune(s)) > 128 {
		return "a detail string is longer than 128 characters"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 || (r >= 0x80 && r < 0xa0) {
			return "a detail string must be one line without control characters"
		}
	}
	return ""
}
