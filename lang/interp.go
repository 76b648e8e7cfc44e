package lang

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

// Closure is a function the program wrote.
type Closure struct {
	name   string
	params *ast.ParameterList
	block  *ast.BlockStatement // a function body, or nil for a concise arrow
	expr   ast.Expression      // a concise arrow body
	env    *env
	async  bool
	self   *ast.Identifier // a named function expression binds itself
}

// method is a method looked up at a call; it is never a program value (L4020).
type method struct {
	recv Value
	name string
}

type slot struct {
	v     Value
	kind  string // const, let, function, param, catch
	init  bool
	owner *branch
}

type env struct {
	parent *env
	mu     sync.Mutex
	vars   map[string]*slot
}

func newEnv(parent *env) *env { return &env{parent: parent, vars: map[string]*slot{}} }

func (e *env) find(name string) *slot {
	for c := e; c != nil; c = c.parent {
		c.mu.Lock()
		s, ok := c.vars[name]
		c.mu.Unlock()
		if ok {
			return s
		}
	}
	return nil
}

func (e *env) def(name string, s *slot) {
	e.mu.Lock()
	e.vars[name] = s
	e.mu.Unlock()
}

// branch is one concurrent line of execution: its key namespace, its run
// clock, and its cancellation.
type branch struct {
	parent    *branch
	path      string // the scope path of its namespace, "" at the root
	mu        sync.Mutex
	effectOcc map[string]int
	scopeOcc  map[string]int
	draws     int
	clock     int64
	cancelled atomic.Bool
	// dispatched closes once the branch has committed to its first effect
	// (or ended): a sibling's cancellation waits for it.
	dispatched   chan struct{}
	dispatchOnce sync.Once
	depth        int // calls in progress on this branch's goroutine
	// ctx ends when the branch (or one it runs in) is cancelled: an effect in flight on
	// a race's losing branch is withdrawn through it. nil at the root, which runs under
	// the run's own context.
	ctx  context.Context
	stop context.CancelFunc
}

// maxCallDepth bounds a walk's recursion: past it the run fails as a host
// fault (its stack is the host's, LANG §9.2), uncatchable by the program.
const maxCallDepth = 4000

// ErrStackExhausted ends a run whose recursion outgrew the host's stack; no
// catch or finally sees it.
var ErrStackExhausted = errors.New("host stack exhausted: the program recursed too deeply")

// markDispatched records that b and every branch it runs in reached an effect.
func (b *branch) markDispatched() {
	for c := b; c != nil; c = c.parent {
		c.dispatchOnce.Do(func() { close(c.dispatched) })
	}
}

func newBranch(parent *branch, path string, clock int64) *branch {
	b := &branch{parent: parent, path: path, effectOcc: map[string]int{}, scopeOcc: map[string]int{}, clock: clock, dispatched: make(chan struct{})}
	if parent != nil && parent.ctx != nil {
		b.ctx, b.stop = context.WithCancel(parent.ctx)
	}
	return b
}

// context is what the branch's effects run under.
func (b *branch) context(root context.Context) context.Context {
	if b.ctx != nil {
		return b.ctx
	}
	return root
}

// cancel marks the branch cancelled and withdraws its effects in flight.
func (b *branch) cancel() {
	b.cancelled.Store(true)
	if b.stop != nil {
		b.stop()
	}
}

func (b *branch) isCancelled() bool {
	for c := b; c != nil; c = c.parent {
		if c.cancelled.Load() {
			return true
		}
	}
	return false
}

// within reports whether b is owner or runs inside it.
func (b *branch) within(owner *branch) bool {
	for c := b; c != nil; c = c.parent {
		if c == owner {
			return true
		}
	}
	return false
}

func (b *branch) advance(t int64) {
	b.mu.Lock()
	if t > b.clock {
		b.clock = t
	}
	b.mu.Unlock()
}

func (b *branch) now() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.clock
}

// errCancelled unwinds a cancelled branch; no catch sees it.
var errCancelled = errors.New("branch cancelled")

// ErrCancelled is what an effect answers when its branch was cancelled (a race's loser,
// or a sibling of a failed branch), live or on replay of a step settled cancelled.
var ErrCancelled = errCancelled

// Uncatchable reports whether err unwinds a run past every catch and finally:
// cancellation, a host stop, and every failure that is not the program's.
func Uncatchable(err error) bool {
	var f *Fault
	var e *EffectError
	var t *thrown
	return !(errors.As(err, &f) || errors.As(err, &e) || errors.As(err, &t))
}

type ctl int

const (
	ctlNormal ctl = iota
	ctlBreak
	ctlContinue
	ctlReturn
)

// errShort ends an optional chain at a nullish link.
var errShort = errors.New("optional chain short-circuit")

type interp struct {
	ctx     context.Context
	p       *parsed
	opts    Options
	globals *env
	steps   atomic.Int64
	effects atomic.Int64
	hash    string

	turnMu sync.Mutex
	turns  map[any]*sync.Mutex // one per agent: concurrent turns on a handle are serialized
}

// turnLock serializes turns on one agent (LANG §6.5): the second begins when
// the first settles, so an agent is never asked to take two turns at once.
func (in *interp) turnLock(agent any) *sync.Mutex {
	in.turnMu.Lock()
	defer in.turnMu.Unlock()
	if in.turns == nil {
		in.turns = map[any]*sync.Mutex{}
	}
	m, ok := in.turns[agent]
	if !ok {
		m = &sync.Mutex{}
		in.turns[agent] = m
	}
	return m
}

// callCtx is what a builtin sees of its call.
type callCtx struct {
	in *interp
	br *branch
}

func (in *interp) step() error {
	if n := in.steps.Add(1); n > in.opts.StepBudget {
		return fault("L4013", "the walk used its step budget of %d", in.opts.StepBudget)
	}
	if err := in.ctx.Err(); err != nil {
		return err
	}
	return nil
}

func (in *interp) hoist(list []ast.Statement, e *env, br *branch) {
	for _, st := range list {
		switch d := st.(type) {
		case *ast.LexicalDeclaration:
			kind := "let"
			if d.Token == token.CONST {
				kind = "const"
			}
			for _, b := range d.List {
				for _, id := range patternNames(b.Target) {
					e.def(id.Name.String(), &slot{kind: kind, owner: br})
				}
			}
		case *ast.FunctionDeclaration:
			f := d.Function
			e.def(f.Name.Name.String(), &slot{kind: "function", init: true, owner: br, v: &Closure{name: f.Name.Name.String(), params: f.ParameterList, block: f.Body, env: e, async: f.Async}})
		}
	}
}

func (in *interp) execList(list []ast.Statement, e *env, br *branch) (ctl, Value, error) {
	in.hoist(list, e, br)
	for _, st := range list {
		c, v, err := in.exec(st, e, br)
		if err != nil || c != ctlNormal {
			return c, v, err
		}
	}
	return ctlNormal, nil, nil
}

func (in *interp) exec(st ast.Statement, e *env, br *branch) (ctl, Value, error) {
	if err := in.step(); err != nil {
		return ctlNormal, nil, err
	}
	switch x := st.(type) {
	case *ast.ExpressionStatement:
		_, err := in.eval(x.Expression, e, br)
		return ctlNormal, nil, err
	case *ast.LexicalDeclaration:
		for _, b := range x.List {
			var v Value = Undefined
			if b.Initializer != nil {
				var err error
				if v, err = in.eval(b.Initializer, e, br); err != nil {
					return ctlNormal, nil, err
				}
				nameFn(v, b.Target)
			}
			if err := in.bind(b.Target, v, e, br, true); err != nil {
				return ctlNormal, nil, err
			}
		}
	case *ast.FunctionDeclaration, *ast.EmptyStatement:
	case *ast.BlockStatement:
		return in.execList(x.List, newEnv(e), br)
	case *ast.IfStatement:
		t, err := in.eval(x.Test, e, br)
		if err != nil {
			return ctlNormal, nil, err
		}
		if truthy(t) {
			return in.exec(x.Consequent, e, br)
		} else if x.Alternate != nil {
			return in.exec(x.Alternate, e, br)
		}
	case *ast.WhileStatement:
		for {
			t, err := in.eval(x.Test, e, br)
			if err != nil {
				return ctlNormal, nil, err
			}
			if !truthy(t) {
				break
			}
			c, v, err := in.exec(x.Body, e, br)
			if err != nil || c == ctlReturn {
				return c, v, err
			}
			if c == ctlBreak {
				break
			}
		}
	case *ast.ForStatement:
		return in.execFor(x, e, br)
	case *ast.ForOfStatement:
		return in.execForOf(x, e, br)
	case *ast.ReturnStatement:
		var v Value = Undefined
		if x.Argument != nil {
			var err error
			if v, err = in.eval(x.Argument, e, br); err != nil {
				return ctlNormal, nil, err
			}
		}
		return ctlReturn, v, nil
	case *ast.BranchStatement:
		if x.Token == token.BREAK {
			return ctlBreak, nil, nil
		}
		return ctlContinue, nil, nil
	case *ast.ThrowStatement:
		v, err := in.eval(x.Argument, e, br)
		if err != nil {
			return ctlNormal, nil, err
		}
		return ctlNormal, nil, &thrown{v: v}
	case *ast.TryStatement:
		return in.execTry(x, e, br)
	case *ast.SwitchStatement:
		return in.execSwitch(x, e, br)
	default:
		return ctlNormal, nil, fault("L1029", "the statement %T is outside the language", st)
	}
	return ctlNormal, nil, nil
}

func (in *interp) execFor(x *ast.ForStatement, e *env, br *branch) (ctl, Value, error) {
	le := newEnv(e)
	var names []string
	switch init := x.Initializer.(type) {
	case *ast.ForLoopInitializerLexicalDecl:
		decl := &init.LexicalDeclaration
		in.hoist([]ast.Statement{decl}, le, br)
		if _, _, err := in.exec(decl, le, br); err != nil {
			return ctlNormal, nil, err
		}
		for _, b := range decl.List {
			for _, id := range patternNames(b.Target) {
				names = append(names, id.Name.String())
			}
		}
	case *ast.ForLoopInitializerExpression:
		if _, err := in.eval(init.Expression, le, br); err != nil {
			return ctlNormal, nil, err
		}
	}
	// for (let ...) binds per iteration: each iteration gets a copy of the
	// loop bindings, made before the update runs, so a closure keeps its own.
	copyEnv := func(from *env) *env {
		if len(names) == 0 {
			return from
		}
		ie := newEnv(e)
		for _, n := range names {
			s := from.find(n)
			ie.def(n, &slot{v: s.v, kind: s.kind, init: s.init, owner: s.owner})
		}
		return ie
	}
	ie := copyEnv(le)
	for {
		if x.Test != nil {
			t, err := in.eval(x.Test, ie, br)
			if err != nil {
				return ctlNormal, nil, err
			}
			if !truthy(t) {
				return ctlNormal, nil, nil
			}
		}
		c, v, err := in.exec(x.Body, ie, br)
		if err != nil || c == ctlReturn {
			return c, v, err
		}
		if c == ctlBreak {
			return ctlNormal, nil, nil
		}
		ie = copyEnv(ie)
		if x.Update != nil {
			if _, err := in.eval(x.Update, ie, br); err != nil {
				return ctlNormal, nil, err
			}
		}
	}
}

func (in *interp) iterate(v Value) ([]Value, error) {
	switch x := v.(type) {
	case *Array:
		return x.list(), nil
	case string:
		var out []Value
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fault("L4015", "a %s is not iterable: for...of and spread take an array or a string", kindOf(v))
}

func (in *interp) execForOf(x *ast.ForOfStatement, e *env, br *branch) (ctl, Value, error) {
	src, err := in.eval(x.Source, e, br)
	if err != nil {
		return ctlNormal, nil, err
	}
	items, err := in.iterate(src)
	if err != nil {
		return ctlNormal, nil, err
	}
	for _, item := range items {
		ie := newEnv(e)
		switch into := x.Into.(type) {
		case *ast.ForDeclaration:
			kind := "let"
			if into.IsConst {
				kind = "const"
			}
			for _, id := range patternNames(into.Target) {
				ie.def(id.Name.String(), &slot{kind: kind, owner: br})
			}
			err = in.bind(into.Target, item, ie, br, true)
		case *ast.ForIntoExpression:
			err = in.bind(into.Expression, item, ie, br, false)
		}
		if err != nil {
			return ctlNormal, nil, err
		}
		c, v, err := in.exec(x.Body, ie, br)
		if err != nil || c == ctlReturn {
			return c, v, err
		}
		if c == ctlBreak {
			break
		}
	}
	return ctlNormal, nil, nil
}

// caught converts a catchable failure into the value a catch binds.
func (in *interp) caught(err error, br *branch) Value {
	var t *thrown
	var f *Fault
	var ee *EffectError
	switch {
	case errors.As(err, &t):
		return t.v
	case errors.As(err, &f):
		r := newRecord(br)
		r.set("code", f.Code)
		r.set("kind", "runtime")
		r.set("message", f.Message)
		return freeze(r)
	case errors.As(err, &ee):
		r := newRecord(br)
		r.set("code", ee.Code)
		r.set("kind", ee.Kind)
		r.set("message", ee.Message)
		if ee.Detail != nil {
			if d, derr := fromCanon(ee.Detail); derr == nil {
				r.set("detail", d)
			}
		}
		return freeze(r)
	}
	return Undefined
}

func (in *interp) execTry(x *ast.TryStatement, e *env, br *branch) (ctl, Value, error) {
	c, v, err := in.execList(x.Body.List, newEnv(e), br)
	if err != nil && Uncatchable(err) {
		return c, v, err
	}
	if err != nil && x.Catch != nil {
		ce := newEnv(e)
		if x.Catch.Parameter != nil {
			for _, id := range patternNames(x.Catch.Parameter) {
				ce.def(id.Name.String(), &slot{kind: "catch", owner: br})
			}
			if berr := in.bind(x.Catch.Parameter, in.caught(err, br), ce, br, true); berr != nil {
				c, v, err = ctlNormal, nil, berr
			} else {
				c, v, err = in.execList(x.Catch.Body.List, ce, br)
			}
		} else {
			c, v, err = in.execList(x.Catch.Body.List, ce, br)
		}
		if err != nil && Uncatchable(err) {
			return c, v, err
		}
	}
	if x.Finally != nil {
		fc, fv, ferr := in.execList(x.Finally.List, newEnv(e), br)
		if ferr != nil || fc != ctlNormal {
			return fc, fv, ferr
		}
	}
	return c, v, err
}

func (in *interp) execSwitch(x *ast.SwitchStatement, e *env, br *branch) (ctl, Value, error) {
	d, err := in.eval(x.Discriminant, e, br)
	if err != nil {
		return ctlNormal, nil, err
	}
	se := newEnv(e)
	var all []ast.Statement
	for _, c := range x.Body {
		all = append(all, c.Consequent...)
	}
	in.hoist(all, se, br)
	start := -1
	for i, c := range x.Body {
		if c.Test == nil {
			continue
		}
		t, err := in.eval(c.Test, se, br)
		if err != nil {
			return ctlNormal, nil, err
		}
		if strictEqual(d, t) {
			start = i
			break
		}
	}
	if start < 0 {
		start = x.Default
	}
	if start < 0 {
		return ctlNormal, nil, nil
	}
	for _, c := range x.Body[start:] {
		for _, st := range c.Consequent {
			ct, v, err := in.exec(st, se, br)
			if err != nil || ct == ctlReturn || ct == ctlContinue {
				return ct, v, err
			}
			if ct == ctlBreak {
				return ctlNormal, nil, nil
			}
		}
	}
	return ctlNormal, nil, nil
}

// nameFn gives an anonymous function the name of the binding it is bound to.
func nameFn(v Value, target ast.Expression) {
	if c, ok := v.(*Closure); ok && c.name == "" {
		if id, ok := target.(*ast.Identifier); ok {
			c.name = id.Name.String()
		}
	}
}

// bind assigns a value to a binding target: declaring (let, const, params)
// or assigning to existing bindings and members.
func (in *interp) bind(target ast.Expression, v Value, e *env, br *branch, declare bool) error {
	switch t := target.(type) {
	case *ast.Identifier:
		return in.setVar(t, v, e, br, declare)
	case *ast.Binding:
		if v == Undefined && t.Initializer != nil {
			var err error
			if v, err = in.eval(t.Initializer, e, br); err != nil {
				return err
			}
		}
		return in.bind(t.Target, v, e, br, declare)
	case *ast.AssignExpression:
		if v == Undefined {
			var err error
			if v, err = in.eval(t.Right, e, br); err != nil {
				return err
			}
			nameFn(v, t.Left)
		}
		return in.bind(t.Left, v, e, br, declare)
	case *ast.ObjectPattern:
		if isNullish(v) {
			return fault("L4010", "destructuring reads a field of %s", kindOf(v))
		}
		used := map[string]bool{}
		for _, pr := range t.Properties {
			switch q := pr.(type) {
			case *ast.PropertyShort:
				name := q.Name.Name.String()
				used[name] = true
				fv, err := in.member(v, name, br)
				if err != nil {
					return err
				}
				if fv == Undefined && q.Initializer != nil {
					if fv, err = in.eval(q.Initializer, e, br); err != nil {
						return err
					}
				}
				n := q.Name
				if err := in.setVar(&n, fv, e, br, declare); err != nil {
					return err
				}
			case *ast.PropertyKeyed:
				key, err := in.propKey(q, e, br)
				if err != nil {
					return err
				}
				used[key] = true
				fv, err := in.member(v, key, br)
				if err != nil {
					return err
				}
				if err := in.bind(q.Value, fv, e, br, declare); err != nil {
					return err
				}
			}
		}
		if t.Rest != nil {
			rest := newRecord(br)
			if r, ok := v.(*Record); ok {
				for _, k := range r.ownKeys() {
					if !used[k] {
						fv, _ := r.get(k)
						rest.set(k, fv)
					}
				}
			}
			return in.bind(t.Rest, rest, e, br, declare)
		}
		return nil
	case *ast.ArrayPattern:
		items, err := in.iterate(v)
		if err != nil {
			return err
		}
		for i, el := range t.Elements {
			var iv Value = Undefined
			if i < len(items) {
				iv = items[i]
			}
			if el != nil {
				if err := in.bind(el, iv, e, br, declare); err != nil {
					return err
				}
			}
		}
		if t.Rest != nil {
			rest := &Array{owner: br}
			if len(items) > len(t.Elements) {
				rest.elems = append(rest.elems, items[len(t.Elements):]...)
			}
			return in.bind(t.Rest, rest, e, br, declare)
		}
		return nil
	case *ast.DotExpression, *ast.BracketExpression:
		return in.assignMember(t, v, e, br)
	}
	return fault("L1029", "cannot bind to %T", target)
}

func (in *interp) setVar(id *ast.Identifier, v Value, e *env, br *branch, declare bool) error {
	name := id.Name.String()
	s := e.find(name)
	if s == nil {
		return fault("L2001", "%s is not declared", name)
	}
	if declare {
		s.v, s.init = v, true
		return nil
	}
	if !s.init {
		return fault("L2004", "%s is used before its declaration", name)
	}
	switch s.kind {
	case "const", "function", "catch", "reserved":
		return fault("L2003", "%s is bound by %s and cannot be reassigned", name, s.kind)
	}
	if s.owner != br {
		return fault("L2032", "a concurrent branch writes %s, which is declared outside it", name)
	}
	s.v = v
	return nil
}

func (in *interp) lookup(id *ast.Identifier, e *env) (Value, error) {
	name := id.Name.String()
	s := e.find(name)
	if s == nil {
		return nil, fault("L2001", "%s is not declared", name)
	}
	if !s.init {
		return nil, fault("L2004", "%s is used before its declaration", name)
	}
	return s.v, nil
}

func (in *interp) propKey(q *ast.PropertyKeyed, e *env, br *branch) (string, error) {
	if !q.Computed {
		switch k := q.Key.(type) {
		case *ast.Identifier:
			return k.Name.String(), nil
		case *ast.StringLiteral:
			return k.Value.String(), nil
		case *ast.NumberLiteral:
			f, _ := toNum(numLit(k), "key")
			return numStr(f), nil
		}
	}
	kv, err := in.eval(q.Key, e, br)
	if err != nil {
		return "", err
	}
	return keyString(kv)
}

func keyString(k Value) (string, error) {
	if isContainer(k) {
		return "", fault("L4018", "a %s is not a member key", kindOf(k))
	}
	return toStr(k, "member key")
}

func numLit(n *ast.NumberLiteral) Value {
	switch x := n.Value.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	f, _ := strconv.ParseFloat(n.Literal, 64)
	return f
}

// canWrite refuses a write into a frozen value (L2031) or into a value born
// outside the writing branch (L2032).
func canWrite(frozen bool, owner, br *branch, what string) error {
	if frozen {
		return fault("L2031", "%s crossed an effect boundary and is frozen", what)
	}
	if owner != nil && !owner.within(br) {
		return fault("L2032", "a concurrent branch writes into %s, which was built outside it", what)
	}
	return nil
}

func (in *interp) assignMember(t ast.Expression, v Value, e *env, br *branch) error {
	var objExpr ast.Expression
	var key Value
	switch m := t.(type) {
	case *ast.DotExpression:
		objExpr, key = m.Left, m.Identifier.Name.String()
	case *ast.BracketExpression:
		objExpr = m.Left
		k, err := in.eval(m.Member, e, br)
		if err != nil {
			return err
		}
		key = k
	}
	obj, err := in.eval(objExpr, e, br)
	if err != nil {
		return err
	}
	return in.setMember(obj, key, v, br)
}

func (in *interp) setMember(obj, key, v Value, br *branch) error {
	switch o := obj.(type) {
	case *Record:
		k, err := keyString(key)
		if err != nil {
			return err
		}
		if err := canWrite(o.frozen, o.owner, br, "this record"); err != nil {
			return err
		}
		if k == "__proto__" {
			return fault("L4014", "a record cannot hold the field __proto__")
		}
		if _, ok := v.(*Closure); ok && k == "then" {
			return fault("L4021", "a record cannot hold a callable then")
		}
		o.set(k, v)
		return nil
	case *Array:
		if err := canWrite(o.frozen, o.owner, br, "this array"); err != nil {
			return err
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if ks, ok := key.(string); ok && ks == "length" {
			n, isNum := v.(float64)
			if !isNum || n != math.Trunc(n) || n < 0 || int(n) > len(o.elems) {
				return fault("L4017", "length may only truncate, to a whole number between 0 and %d", len(o.elems))
			}
			o.elems = o.elems[:int(n)]
			return nil
		}
		i, ok := arrayIndex(key)
		if !ok {
			return fault("L4014", "an array takes an index or length")
		}
		switch {
		case i < len(o.elems):
			o.elems[i] = v
		case i == len(o.elems):
			o.elems = append(o.elems, v)
		default:
			return fault("L4019", "index %d is past the end of an array of length %d", i, len(o.elems))
		}
		return nil
	case nil, undefinedType:
		return fault("L4010", "cannot write a field of %s", kindOf(obj))
	}
	return fault("L4014", "a %s has no writable members", kindOf(obj))
}

func arrayIndex(k Value) (int, bool) {
	switch x := k.(type) {
	case float64:
		if x >= 0 && x == math.Trunc(x) && x < 1<<31 {
			return int(x), true
		}
	case string:
		n, err := strconv.Atoi(x)
		if err == nil && n >= 0 && strconv.Itoa(n) == x {
			return n, true
		}
	}
	return 0, false
}

// member reads obj[key] for a value read (never a call).
func (in *interp) member(obj Value, key Value, br *branch) (Value, error) {
	v, err := in.memberOrMethod(obj, key)
	if err != nil {
		return nil, err
	}
	if m, ok := v.(*method); ok {
		return nil, fault("L4020", "%s is a method of a %s and is not a value: call it, or wrap it in a function", m.name, kindOf(obj))
	}
	return v, nil
}

func (in *interp) memberOrMethod(obj Value, key Value) (Value, error) {
	if isContainer(key) {
		return nil, fault("L4018", "a %s is not a member key", kindOf(key))
	}
	switch o := obj.(type) {
	case nil, undefinedType:
		ks, _ := toStr(key, "")
		return nil, fault("L4010", "cannot read %q of %s", ks, kindOf(obj))
	case *Record:
		k, _ := toStr(key, "")
		if v, ok := o.get(k); ok {
			return v, nil
		}
		return Undefined, nil
	case *Array:
		if ks, ok := key.(string); ok {
			if ks == "length" {
				o.mu.Lock()
				defer o.mu.Unlock()
				return float64(len(o.elems)), nil
			}
			if arrayMethods[ks] {
				return &method{recv: o, name: ks}, nil
			}
		}
		if i, ok := arrayIndex(key); ok {
			o.mu.Lock()
			defer o.mu.Unlock()
			if i < len(o.elems) {
				return o.elems[i], nil
			}
			return Undefined, nil
		}
		ks, _ := toStr(key, "")
		return nil, fault("L4014", "an array has no member %q", ks)
	case string:
		if ks, ok := key.(string); ok {
			if ks == "length" {
				return float64(utf16Len(o)), nil
			}
			if stringMethods[ks] {
				return &method{recv: o, name: ks}, nil
			}
		}
		if i, ok := arrayIndex(key); ok {
			u := utf16Of(o)
			if i < len(u) {
				return fromUTF16(u[i : i+1]), nil
			}
			return Undefined, nil
		}
		ks, _ := toStr(key, "")
		return nil, fault("L4014", "a string has no member %q", ks)
	case float64:
		if ks, ok := key.(string); ok && numberMethods[ks] {
			return &method{recv: o, name: ks}, nil
		}
		ks, _ := toStr(key, "")
		return nil, fault("L4014", "a number has no member %q", ks)
	}
	ks, _ := toStr(key, "")
	return nil, fault("L4014", "a %s has no member %q", kindOf(obj), ks)
}
