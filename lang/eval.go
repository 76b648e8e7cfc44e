package lang

import (
	"errors"
	"math"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

func (in *interp) eval(x ast.Expression, e *env, br *branch) (Value, error) {
	if err := in.step(); err != nil {
		return nil, err
	}
	switch n := x.(type) {
	case *ast.Identifier:
		return in.lookup(n, e)
	case *ast.NullLiteral:
		return nil, nil
	case *ast.BooleanLiteral:
		return n.Value, nil
	case *ast.StringLiteral:
		return n.Value.String(), nil
	case *ast.NumberLiteral:
		return numLit(n), nil
	case *ast.TemplateLiteral:
		var b strings.Builder
		for i, el := range n.Elements {
			b.WriteString(el.Parsed.String())
			if i < len(n.Expressions) {
				v, err := in.eval(n.Expressions[i], e, br)
				if err != nil {
					return nil, err
				}
				s, err := toStr(v, "template interpolation")
				if err != nil {
					return nil, err
				}
				b.WriteString(s)
			}
		}
		return b.String(), nil
	case *ast.ArrayLiteral:
		a := &Array{owner: br}
		for _, el := range n.Value {
			if sp, ok := el.(*ast.SpreadElement); ok {
				v, err := in.eval(sp.Expression, e, br)
				if err != nil {
					return nil, err
				}
				items, err := in.iterate(v)
				if err != nil {
					return nil, err
				}
				a.elems = append(a.elems, items...)
				continue
			}
			v, err := in.eval(el, e, br)
			if err != nil {
				return nil, err
			}
			a.elems = append(a.elems, v)
		}
		return a, nil
	case *ast.ObjectLiteral:
		return in.evalObject(n, e, br)
	case *ast.DotExpression:
		obj, err := in.eval(n.Left, e, br)
		if err != nil {
			return nil, err
		}
		return in.member(obj, n.Identifier.Name.String(), br)
	case *ast.BracketExpression:
		obj, err := in.eval(n.Left, e, br)
		if err != nil {
			return nil, err
		}
		k, err := in.eval(n.Member, e, br)
		if err != nil {
			return nil, err
		}
		return in.member(obj, k, br)
	case *ast.OptionalChain:
		v, err := in.eval(n.Expression, e, br)
		if errors.Is(err, errShort) {
			return Undefined, nil
		}
		return v, err
	case *ast.Optional:
		v, err := in.eval(n.Expression, e, br)
		if err == nil && isNullish(v) {
			return nil, errShort
		}
		return v, err
	case *ast.UnaryExpression:
		return in.evalUnary(n, e, br)
	case *ast.BinaryExpression:
		l, err := in.eval(n.Left, e, br)
		if err != nil {
			return nil, err
		}
		switch n.Operator {
		case token.LOGICAL_AND:
			if !truthy(l) {
				return l, nil
			}
			return in.eval(n.Right, e, br)
		case token.LOGICAL_OR:
			if truthy(l) {
				return l, nil
			}
			return in.eval(n.Right, e, br)
		case token.COALESCE:
			if !isNullish(l) {
				return l, nil
			}
			return in.eval(n.Right, e, br)
		}
		r, err := in.eval(n.Right, e, br)
		if err != nil {
			return nil, err
		}
		return binary(n.Operator, l, r)
	case *ast.ConditionalExpression:
		t, err := in.eval(n.Test, e, br)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return in.eval(n.Consequent, e, br)
		}
		return in.eval(n.Alternate, e, br)
	case *ast.AssignExpression:
		return in.evalAssign(n, e, br)
	case *ast.AwaitExpression:
		return in.eval(n.Argument, e, br)
	case *ast.ArrowFunctionLiteral:
		c := &Closure{params: n.ParameterList, env: e, async: n.Async}
		switch b := n.Body.(type) {
		case *ast.BlockStatement:
			c.block = b
		case *ast.ExpressionBody:
			c.expr = b.Expression
		}
		return c, nil
	case *ast.FunctionLiteral:
		c := &Closure{params: n.ParameterList, block: n.Body, env: e, async: n.Async, self: n.Name}
		if n.Name != nil {
			c.name = n.Name.Name.String()
		}
		return c, nil
	case *ast.CallExpression:
		return in.evalCall(n, e, br)
	}
	return nil, fault("L1029", "the expression %T is outside the language", x)
}

func (in *interp) evalObject(n *ast.ObjectLiteral, e *env, br *branch) (Value, error) {
	r := newRecord(br)
	put := func(k string, v Value) error {
		if k == "__proto__" {
			return fault("L4014", "a record cannot hold the field __proto__")
		}
		if k == "then" && isCallable(v) {
			return fault("L4021", "a record cannot hold a callable then")
		}
		r.set(k, v)
		return nil
	}
	for _, pr := range n.Value {
		switch q := pr.(type) {
		case *ast.PropertyKeyed:
			k, err := in.propKey(q, e, br)
			if err != nil {
				return nil, err
			}
			v, err := in.eval(q.Value, e, br)
			if err != nil {
				return nil, err
			}
			if c, ok := v.(*Closure); ok && c.name == "" {
				c.name = k
			}
			if err := put(k, v); err != nil {
				return nil, err
			}
		case *ast.PropertyShort:
			n := q.Name
			v, err := in.lookup(&n, e)
			if err != nil {
				return nil, err
			}
			if err := put(q.Name.Name.String(), v); err != nil {
				return nil, err
			}
		case *ast.SpreadElement:
			v, err := in.eval(q.Expression, e, br)
			if err != nil {
				return nil, err
			}
			switch s := v.(type) {
			case *Record:
				for _, k := range s.ownKeys() {
					fv, _ := s.get(k)
					if err := put(k, fv); err != nil {
						return nil, err
					}
				}
			case nil, undefinedType:
			case *Array:
				for i, fv := range s.list() {
					r.set(numStr(float64(i)), fv)
				}
			case string:
				for i, u := range utf16Of(s) {
					r.set(numStr(float64(i)), fromUTF16([]uint16{u}))
				}
			}
		}
	}
	return r, nil
}

func isCallable(v Value) bool {
	switch v.(type) {
	case *Closure, *Builtin:
		return true
	}
	return false
}

func (in *interp) evalUnary(n *ast.UnaryExpression, e *env, br *branch) (Value, error) {
	if n.Operator == token.INCREMENT || n.Operator == token.DECREMENT {
		old, err := in.eval(n.Operand, e, br)
		if err != nil {
			return nil, err
		}
		f, ok := old.(float64)
		if !ok {
			return nil, fault("L4018", "%s takes a number, not a %s", n.Operator, kindOf(old))
		}
		nv := f + 1
		if n.Operator == token.DECREMENT {
			nv = f - 1
		}
		if err := in.bind(n.Operand, nv, e, br, false); err != nil {
			return nil, err
		}
		if n.Postfix {
			return f, nil
		}
		return nv, nil
	}
	if n.Operator == token.TYPEOF {
		if id, ok := n.Operand.(*ast.Identifier); ok && e.find(id.Name.String()) == nil {
			return "undefined", nil
		}
	}
	v, err := in.eval(n.Operand, e, br)
	if err != nil {
		return nil, err
	}
	switch n.Operator {
	case token.NOT:
		return !truthy(v), nil
	case token.TYPEOF:
		return typeOf(v), nil
	}
	if isContainer(v) {
		return nil, fault("L4018", "the operator %s does not take a %s", n.Operator, kindOf(v))
	}
	f, _ := toNum(v, n.Operator.String())
	switch n.Operator {
	case token.MINUS:
		return -f, nil
	case token.PLUS:
		return f, nil
	case token.BITWISE_NOT:
		return float64(^toInt32(f)), nil
	}
	return nil, fault("L1029", "the operator %s is outside the language", n.Operator)
}

func (in *interp) evalAssign(n *ast.AssignExpression, e *env, br *branch) (Value, error) {
	if n.Operator == token.ASSIGN {
		v, err := in.eval(n.Right, e, br)
		if err != nil {
			return nil, err
		}
		nameFn(v, n.Left)
		return v, in.bind(n.Left, v, e, br, false)
	}
	old, err := in.eval(n.Left, e, br)
	if err != nil {
		return nil, err
	}
	// goja spells a compound assignment by its binary operator (x += 1 is
	// ASSIGN with PLUS); the *_ASSIGN tokens are accepted too.
	op := n.Operator
	if b, ok := compoundOp[op]; ok {
		op = b
	}
	switch op {
	case token.LOGICAL_AND_ASSIGN, token.LOGICAL_OR_ASSIGN, token.COALESCE_ASSIGN, token.LOGICAL_AND, token.LOGICAL_OR, token.COALESCE:
		keep := ((op == token.LOGICAL_AND_ASSIGN || op == token.LOGICAL_AND) && !truthy(old)) ||
			((op == token.LOGICAL_OR_ASSIGN || op == token.LOGICAL_OR) && truthy(old)) ||
			((op == token.COALESCE_ASSIGN || op == token.COALESCE) && !isNullish(old))
		if keep {
			return old, nil
		}
		v, err := in.eval(n.Right, e, br)
		if err != nil {
			return nil, err
		}
		return v, in.bind(n.Left, v, e, br, false)
	}
	r, err := in.eval(n.Right, e, br)
	if err != nil {
		return nil, err
	}
	if !binaryAdmitted[op] || op == token.STRICT_EQUAL || op == token.STRICT_NOT_EQUAL {
		return nil, fault("L1029", "the operator %s= is outside the language", op)
	}
	v, err := binary(op, old, r)
	if err != nil {
		return nil, err
	}
	return v, in.bind(n.Left, v, e, br, false)
}

func (in *interp) evalArgs(list []ast.Expression, e *env, br *branch) ([]Value, error) {
	var out []Value
	for _, a := range list {
		if sp, ok := a.(*ast.SpreadElement); ok {
			v, err := in.eval(sp.Expression, e, br)
			if err != nil {
				return nil, err
			}
			items, err := in.iterate(v)
			if err != nil {
				return nil, err
			}
			out = append(out, items...)
			continue
		}
		v, err := in.eval(a, e, br)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (in *interp) evalCall(n *ast.CallExpression, e *env, br *branch) (Value, error) {
	var fn Value
	var err error
	switch c := n.Callee.(type) {
	case *ast.DotExpression:
		var obj Value
		if obj, err = in.eval(c.Left, e, br); err != nil {
			return nil, err
		}
		fn, err = in.memberOrMethod(obj, c.Identifier.Name.String())
	case *ast.BracketExpression:
		var obj, k Value
		if obj, err = in.eval(c.Left, e, br); err != nil {
			return nil, err
		}
		if k, err = in.eval(c.Member, e, br); err != nil {
			return nil, err
		}
		fn, err = in.memberOrMethod(obj, k)
	case *ast.Optional:
		fn, err = in.eval(c.Expression, e, br)
		if err == nil && isNullish(fn) {
			return nil, errShort
		}
	default:
		fn, err = in.eval(n.Callee, e, br)
	}
	if err != nil {
		return nil, err
	}
	args, err := in.evalArgs(n.ArgumentList, e, br)
	if err != nil {
		return nil, err
	}
	return in.call(fn, args, br)
}

// call invokes a function value.
func (in *interp) call(fn Value, args []Value, br *branch) (Value, error) {
	switch f := fn.(type) {
	case *Closure:
		return in.callClosure(f, args, br)
	case *Builtin:
		return f.fn(&callCtx{in: in, br: br}, args)
	case *method:
		return in.callMethod(f, args, br)
	}
	return nil, fault("L4011", "a %s is not a function", kindOf(fn))
}

func (in *interp) callClosure(f *Closure, args []Value, br *branch) (Value, error) {
	br.depth++
	defer func() { br.depth-- }()
	if br.depth > maxCallDepth {
		return nil, ErrStackExhausted
	}
	fe := newEnv(f.env)
	if f.self != nil {
		fe.def(f.self.Name.String(), &slot{v: f, kind: "function", init: true, owner: br})
	}
	for _, b := range f.params.List {
		for _, id := range patternNames(b.Target) {
			fe.def(id.Name.String(), &slot{kind: "param", owner: br})
		}
	}
	for i, b := range f.params.List {
		var v Value = Undefined
		if i < len(args) {
			v = args[i]
		}
		if err := in.bind(b, v, fe, br, true); err != nil {
			return nil, err
		}
	}
	if f.params.Rest != nil {
		rest := &Array{owner: br}
		if len(args) > len(f.params.List) {
			rest.elems = append(rest.elems, args[len(f.params.List):]...)
		}
		for _, id := range patternNames(f.params.Rest) {
			fe.def(id.Name.String(), &slot{kind: "param", owner: br})
		}
		if err := in.bind(f.params.Rest, rest, fe, br, true); err != nil {
			return nil, err
		}
	}
	if f.expr != nil {
		return in.eval(f.expr, fe, br)
	}
	c, v, err := in.execList(f.block.List, fe, br)
	if err != nil {
		return nil, err
	}
	if c == ctlReturn {
		return v, nil
	}
	return Undefined, nil
}

var _ = math.NaN
