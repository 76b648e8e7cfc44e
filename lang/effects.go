package lang

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Call is one effect as the program asks for it, keyed by its place in the
// program. A journaling driver looks Key up before performing anything: a
// recorded result is returned as it was recorded and nothing is performed.
type Call struct {
	Kind       string         `json:"kind"`       // spawn, turn, ask, checkpoint, sleep, wait, waitUntil, notify, monitor
	Name       string         `json:"name"`       // the step name, "" when unnamed
	Scope      string         `json:"scope"`      // the scope path of the calling branch, "" at the root
	Occurrence int            `json:"occurrence"` // the n-th (kind, name) in this namespace
	Key        string         `json:"key"`        // scope path + "/" + kind[":" + name] + "#" + occurrence
	InputHash  string         `json:"inputHash"`  // digest of the kind's projection (LANG §6.4)
	Attempt    int            `json:"attempt"`    // 0, or 1 for an escalated checkpoint's second mint
	RequestID  string         `json:"requestId"`  // the identity the handler submits under (LANG §10.4)
	Input      map[string]any `json:"input"`      // the projection that was hashed
	Args       []any          `json:"args"`       // the canonical arguments, option bag included
	// Observe runs one observation of a waitUntil probe in its own namespace
	// and reports whether it is terminal; nil for every other kind.
	Observe func(ctx context.Context, n int) (observation any, terminal bool, err error) `json:"-"`
}

// Result is what an effect answered: a canonical value, and the run-clock
// time (ms) at which it ended, which advances the branch's now(). A scope's
// run also reports its branch keys and the branches it cancelled (a race's
// losers, or the siblings of a failed branch) for the scope's journal entry.
type Result struct {
	Value    any
	EndedAt  int64
	Branches []string
	Losers   []string
}

// Effects is the only way out of a program. Every method may block; a
// returned *EffectError is a failure the program can catch, and any other
// error unwinds the run uncaught (a refused append, a release, a cancelled
// context). Implementations must be safe for concurrent use: branches of a
// scope call concurrently.
type Effects interface {
	// Perform performs (or replays) one effect.
	Perform(ctx context.Context, c Call) (Result, error)
	// Scope opens a concurrency scope keyed like an effect (kind parallel,
	// race, fanOut or conclave). run walks the branches and answers the
	// scope's value; a driver replaying a settled scope returns the recorded
	// value without calling run. For a conclave, opened is the channel handle
	// { channel } the handler created; for the others it is nil.
	Scope(ctx context.Context, c Call, run func(ctx context.Context, opened any) (Result, error)) (Result, error)
	// Log writes one trace line from the given scope path; it is not journaled.
	Log(scope string, line string)
}

// LanguageVersion is the language version this engine speaks (LANG §8.4): a
// driver stamps it on the pins of a fresh run and refuses a recorded run
// stamped otherwise (L5008). Its semantics follow version 2 (log refuses code).
const LanguageVersion = "2"

// Options are a run's pins and its effect boundary.
type Options struct {
	RunID         string  // the run id
	Seed          string  // the PRNG seed; default the run id
	StartedAt     int64   // the logical epoch in ms: now() before the first effect
	StepBudget    int64   // dispatches per walk before L4013; default 1 000 000
	EffectCeiling int64   // effects per run before L4009; default 10 000
	Effects       Effects // the effect boundary; required
}

// Program is a validated program ready to run.
type Program struct {
	Source   string
	Hash     string
	Warnings []Problem
	p        *parsed
}

// Compile validates a program and answers it ready to run, or a
// *RefusedError listing every problem.
func Compile(source string) (*Program, error) {
	p, perr := parse(source)
	if perr != nil {
		return nil, &RefusedError{Problems: []Problem{*perr}}
	}
	v := validateParsed(p)
	if !v.OK() {
		return nil, &RefusedError{Problems: v.Problems}
	}
	return &Program{Source: source, Hash: ProgramHash(source), Warnings: v.Warnings, p: p}, nil
}

// Run executes the program from the top under opts. Every effect goes through
// opts.Effects; nothing else reaches the host. A program's uncaught throw or
// runtime refusal is returned as *ThrowError, *Fault or *EffectError.
func (prog *Program) Run(ctx context.Context, opts Options) error {
	if opts.Effects == nil {
		return errors.New("run program: no effect boundary given")
	}
	if opts.RunID == "" {
		return errors.New("run program: no run id given")
	}
	if opts.Seed == "" {
		opts.Seed = opts.RunID
	}
	if opts.StepBudget <= 0 {
		opts.StepBudget = 1_000_000
	}
	if opts.EffectCeiling <= 0 {
		opts.EffectCeiling = 10_000
	}
	in := &interp{ctx: ctx, p: prog.p, opts: opts, hash: prog.Hash}
	in.globals = newEnv(nil)
	in.installGlobals()
	root := newBranch(nil, "", opts.StartedAt)
	root.ctx = ctx
	_, _, err := in.execList(prog.p.body, newEnv(in.globals), root)
	var t *thrown
	if errors.As(err, &t) {
		c, cerr := toCanon(t.v, "$", map[any]bool{})
		if cerr != nil {
			c = nil
		}
		return &ThrowError{Value: c, text: display(t.v)}
	}
	return err
}

func (in *interp) installGlobals() {
	def := func(name string, fn func(c *callCtx, args []Value) (Value, error)) {
		in.globals.def(name, &slot{v: &Builtin{name: name, fn: fn}, kind: "reserved", init: true})
	}
	in.globals.def("undefined", &slot{v: Undefined, kind: "reserved", init: true})
	for name := range effects {
		name := name
		def(name, func(c *callCtx, args []Value) (Value, error) { return c.in.effect(name, args, c.br) })
	}
	in.installLibrary(def)
}

// stepKey allocates the next key for (kind, name) in br's namespace.
func (br *branch) allocate(kind, name string, scope bool) (key string, occ int) {
	id := kind
	if name != "" {
		id += ":" + name
	}
	br.mu.Lock()
	counters := br.effectOcc
	if scope {
		counters = br.scopeOcc
	}
	occ = counters[id]
	counters[id] = occ + 1
	br.mu.Unlock()
	return fmt.Sprintf("%s/%s#%d", br.path, id, occ), occ
}

func argAt(args []Value, i int) Value {
	if i < len(args) {
		return args[i]
	}
	return Undefined
}

// optionBag reads an effect's option bag as a record, refusing unknown keys.
func optionBag(kind string, v Value) (*Record, error) {
	if v == Undefined {
		return newRecord(nil), nil
	}
	r, ok := v.(*Record)
	if !ok {
		return nil, fault("L3011", "the options of %s must be a record, not a %s", kind, kindOf(v))
	}
	sig := effects[kind]
	for _, k := range r.ownKeys() {
		if !sig.keys[k] {
			return nil, fault("L3011", "%s has no option %q; the signature is %s", kind, k, sig.signature)
		}
	}
	return r, nil
}

func field(r *Record, k string) Value {
	if r == nil {
		return Undefined
	}
	v, ok := r.get(k)
	if !ok {
		return Undefined
	}
	return v
}

// canonOrNull canonicalizes an option, an absent one being null.
func canonOrNull(v Value, path string) (any, error) {
	if v == Undefined {
		return nil, nil
	}
	return toCanon(v, path, map[any]bool{})
}

// stepName reads and checks an effect's step name.
func stepName(kind string, v Value, required bool) (string, error) {
	if v == Undefined {
		if required {
			return "", fault("L3012", "%s needs a step name", kind)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fault("L3014", "the step name of %s must be a string", kind)
	}
	if strings.ContainsAny(s, "/#:") {
		return "", fault("L3025", "the step name %q contains /, # or :", s)
	}
	if !stepNameRE.MatchString(s) {
		return "", fault("L3014", "the step name %q is not a kebab-case token of 1 to 64 characters", s)
	}
	return s, nil
}

func agentID(v Value, path string) (any, error) {
	if r, ok := v.(*Record); ok {
		if a, ok := field(r, "agent").(string); ok {
			return a, nil
		}
	}
	return nil, fault("L3041", "%s is not an agent handle from spawn", path)
}

// effect performs one effect primitive call.
func (in *interp) effect(kind string, args []Value, br *branch) (Value, error) {
	if effects[kind].scope {
		return in.scope(kind, args, br)
	}
	sig := effects[kind]
	bag, err := optionBag(kind, argAt(args, sig.bagIndex))
	if err != nil {
		return nil, err
	}
	var name string
	if kind == "checkpoint" {
		name, err = stepName(kind, argAt(args, 0), true)
	} else {
		name, err = stepName(kind, field(bag, "name"), sig.nameRule == nameRequired)
	}
	if err != nil {
		return nil, err
	}
	if kind == "spawn" && name == "" {
		// A spawn is named after its persona when it names no step.
		switch p := argAt(args, 0).(type) {
		case string:
			name = p
		case *Record:
			name, _ = field(p, "persona").(string)
		}
		if strings.ContainsAny(name, "/#:") {
			return nil, fault("L3025", "the persona %q, which names this spawn's step, contains /, # or :", name)
		}
	}
	// Every argument must cross (L3041, L3042) before anything is journaled.
	canonArgs := make([]any, 0, len(args))
	for i, a := range args {
		if kind == "waitUntil" && i == 0 {
			if !isCallable(a) {
				return nil, fault("L3045", "the waitUntil probe is not a function")
			}
			canonArgs = append(canonArgs, nil)
			continue
		}
		if kind == "waitUntil" && i == 1 {
			if t := field(bag, "terminal"); t != Undefined && !isCallable(t) {
				return nil, fault("L4024", "terminal must be a function")
			}
			plain := newRecord(nil)
			for _, k := range bag.ownKeys() {
				if k != "terminal" {
					fv, _ := bag.get(k)
					plain.set(k, fv)
				}
			}
			a = plain
		}
		c, err := toCanon(a, fmt.Sprintf("argument %d of %s", i+1, kind), map[any]bool{})
		if err != nil {
			return nil, err
		}
		canonArgs = append(canonArgs, c)
		freeze(a)
	}
	input, err := in.projection(kind, args, bag)
	if err != nil {
		return nil, err
	}
	if n := in.effects.Add(1); n > in.opts.EffectCeiling {
		return nil, fault("L4009", "the run reached its effect ceiling of %d", in.opts.EffectCeiling)
	}
	if br.isCancelled() {
		return nil, errCancelled
	}
	br.markDispatched()
	key, occ := br.allocate(kind, name, false)
	hash, err := Digest(input)
	if err != nil {
		return nil, fault("L3041", "the inputs of %s have no canonical form: %v", kind, err)
	}
	call := Call{Kind: kind, Name: name, Scope: br.path, Occurrence: occ, Key: key, InputHash: hash,
		RequestID: RequestID(in.opts.RunID, key, hash, 0), Input: input, Args: canonArgs}
	if kind == "waitUntil" {
		call.Observe = in.observer(key, args[0], field(bag, "terminal"), br)
	}
	if kind == "turn" {
		m := in.turnLock(input["agent"])
		m.Lock()
		defer m.Unlock()
	}
	res, err := in.opts.Effects.Perform(br.context(in.ctx), call)
	if err != nil {
		if br.isCancelled() && in.ctx.Err() == nil {
			return nil, errCancelled
		}
		return nil, err
	}
	br.advance(res.EndedAt)
	if kind == "checkpoint" {
		return in.disposition(call, bag, res, br)
	}
	v, err := fromCanon(res.Value)
	if err != nil {
		return nil, &EffectError{Code: "L4000", Kind: "handler-fault", Message: "the result of " + key + " has no canonical form: " + err.Error()}
	}
	return v, nil
}

// disposition maps a checkpoint's raw outcome ({ outcome: "resolved", value?,
// by?, artifact?, answerId?, at } or { outcome: "expired", at }) to what the
// program sees ({ status, value?, by?, at, artifact? }) under today's onExpiry,
// on the live and the replay path alike.
func (in *interp) disposition(call Call, bag *Record, res Result, br *branch) (Value, error) {
	out, ok := res.Value.(map[string]any)
	if !ok {
		return nil, &EffectError{Code: "L4000", Kind: "handler-fault", Message: "checkpoint " + call.Key + " answered no outcome record"}
	}
	if outcomeOf(out) != "expired" {
		seen := map[string]any{"status": "resolved", "at": out["at"]}
		for _, k := range []string{"value", "by", "artifact"} {
			if v, ok := out[k]; ok {
				seen[k] = v
			}
		}
		return fromCanon(seen)
	}
	expired := func(at any) (Value, error) {
		return fromCanon(map[string]any{"status": "expired", "at": at})
	}
	switch field(bag, "onExpiry") {
	case "proceed":
		return expired(out["at"])
	case "escalate":
		second := call
		second.Attempt = 1
		second.RequestID = RequestID(in.opts.RunID, call.Key, call.InputHash, 1)
		res2, err := in.opts.Effects.Perform(br.context(in.ctx), second)
		if err != nil {
			return nil, err
		}
		br.advance(res2.EndedAt)
		if out2, ok := res2.Value.(map[string]any); ok && outcomeOf(out2) == "expired" {
			return expired(out2["at"])
		}
		return in.disposition(call, newRecord(nil), res2, br)
	}
	return nil, &EffectError{Code: "L4007", Kind: "expired", Message: "checkpoint " + call.Key + " expired"}
}

// outcomeOf reads a raw checkpoint outcome; a handler may also answer status.
func outcomeOf(out map[string]any) string {
	if o, ok := out["outcome"].(string); ok {
		return o
	}
	s, _ := out["status"].(string)
	return s
}

// projection builds the input-hash projection of an effect (LANG §6.4).
func (in *interp) projection(kind string, args []Value, bag *Record) (map[string]any, error) {
	opt := func(k string) (any, error) { return canonOrNull(field(bag, k), kind+" option "+k) }
	p := map[string]any{}
	var err error
	set := func(k string, v any, e error) {
		if err == nil {
			p[k], err = v, e
		}
	}
	switch kind {
	case "spawn":
		persona := argAt(args, 0)
		var pn, model, variant any
		switch x := persona.(type) {
		case string:
			pn = x
		case *Record:
			pn, _ = canonOrNull(field(x, "persona"), "persona")
			model, _ = canonOrNull(field(x, "model"), "model")
			variant, _ = canonOrNull(field(x, "variant"), "variant")
		default:
			return nil, fault("L3041", "spawn needs a persona name or { persona, model?, variant? }")
		}
		p["persona"], p["model"], p["variant"] = pn, model, variant
		w, e := opt("worktree")
		set("worktree", w, e)
		r, e := opt("role")
		set("role", r, e)
		join := []any{}
		if j, ok := field(bag, "join").(*Array); ok {
			for _, c := range j.list() {
				switch ch := c.(type) {
				case string:
					join = append(join, ch)
				case *Record:
					join = append(join, field(ch, "channel"))
				}
			}
		}
		p["join"] = join
	case "turn", "monitor":
		a, e := agentID(argAt(args, 0), kind+" agent")
		set("agent", a, e)
		if kind == "turn" {
			d, e := opt("deadline")
			set("deadline", d, e)
		}
	case "ask":
		a, e := agentID(argAt(args, 0), "ask agent")
		set("agent", a, e)
		for _, k := range []string{"schema", "deadline", "attempts"} {
			v, e := opt(k)
			set(k, v, e)
		}
	case "checkpoint":
		pr, e := canonOrNull(argAt(args, 1), "checkpoint prompt")
		set("prompt", pr, e)
		for _, k := range []string{"schema", "timeout"} {
			v, e := opt(k)
			set(k, v, e)
		}
		if field(bag, "to") != Undefined && field(bag, "onExpiry") != "escalate" {
			return nil, fault("L3044", "to is legal only with onExpiry: \"escalate\"")
		}
		if field(bag, "onExpiry") == "escalate" {
			p["onExpiry"] = "escalate"
			to, e := opt("to")
			set("to", to, e)
		}
	case "sleep":
		d, ok := argAt(args, 0).(string)
		if _, perr := ParseDuration(d); !ok || perr != nil {
			return nil, fault("L4016", "sleep needs a duration such as \"30s\", not %s", display(argAt(args, 0)))
		}
		p["duration"] = d
	case "wait":
		ev, e := canonOrNull(argAt(args, 0), "wait event")
		set("event", ev, e)
		t, e := opt("timeout")
		set("timeout", t, e)
	case "waitUntil":
		for _, k := range []string{"every", "deadline"} {
			s, ok := field(bag, k).(string)
			if !ok {
				return nil, fault("L3046", "waitUntil needs both every and deadline as durations")
			}
			if _, perr := ParseDuration(s); perr != nil {
				return nil, fault("L3046", "waitUntil %s: %v", k, perr)
			}
			p[k] = s
		}
		every, _ := ParseDuration(p["every"].(string))
		deadline, _ := ParseDuration(p["deadline"].(string))
		if every == 0 || every > deadline {
			return nil, fault("L3047", "the waitUntil cadence %s is zero or longer than its deadline %s", p["every"], p["deadline"])
		}
	case "notify":
		ids := []any{}
		list, ok := argAt(args, 0).(*Array)
		if !ok {
			return nil, fault("L3041", "notify needs a list of agent handles")
		}
		for i, a := range list.list() {
			id, e := agentID(a, fmt.Sprintf("notify agent %d", i))
			if e != nil {
				return nil, e
			}
			ids = append(ids, id)
		}
		fact, e := canonOrNull(argAt(args, 1), "notify fact")
		if e != nil {
			return nil, e
		}
		if msg := checkFact(fact); msg != "" {
			return nil, fault("L3043", "the notify fact is not a bounded decision record: %s", msg)
		}
		p["agents"], p["fact"] = ids, fact
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// checkFact checks a notify fact at the effect boundary (LANG §6.8).
func checkFact(v any) string {
	f, ok := v.(map[string]any)
	if !ok {
		return "it must be a record"
	}
	for k := range f {
		if k != "decision" && k != "outcome" && k != "detail" {
			return fmt.Sprintf("%q is not a field of a decision record", k)
		}
	}
	for _, k := range []string{"decision", "outcome"} {
		s, ok := f[k].(string)
		if !ok || !stepNameRE.MatchString(s) {
			return k + " must be a step-name token"
		}
	}
	d, present := f["detail"]
	if !present {
		return ""
	}
	dm, ok := d.(map[string]any)
	if !ok {
		return "detail must be a record"
	}
	if len(dm) > 8 {
		return "detail holds more than 8 keys"
	}
	for k, val := range dm {
		if !kebabKeyRE.MatchString(k) {
			return fmt.Sprintf("detail key %q is not a kebab-case token of at most 32 characters", k)
		}
		switch x := val.(type) {
		case float64, bool:
		case string:
			if msg := checkDetailString(x); msg != "" {
				return msg
			}
		default:
			return "a detail value must be a finite number, a boolean or a one-line string"
		}
	}
	return ""
}

// observer runs waitUntil observations, each in its own namespace.
func (in *interp) observer(key string, probe, terminal Value, br *branch) func(ctx context.Context, n int) (any, bool, error) {
	var mu sync.Mutex
	return func(ctx context.Context, n int) (any, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		ob := newBranch(br, fmt.Sprintf("%s/b:%d", key, n), br.now())
		v, err := in.call(probe, nil, ob)
		if err != nil {
			return nil, false, err
		}
		c, err := toCanon(v, "observation", map[any]bool{})
		if err != nil {
			return nil, false, fault("L4024", "the probe answered a value with no canonical form: %v", err)
		}
		done := v != nil && v != Undefined
		if terminal != Undefined {
			t, err := in.call(terminal, []Value{freeze(v)}, ob)
			if err != nil {
				return nil, false, err
			}
			b, ok := t.(bool)
			if !ok {
				return nil, false, fault("L4024", "terminal answered a %s, not a boolean", kindOf(t))
			}
			done = b
		}
		br.advance(ob.now())
		return c, done, nil
	}
}

type arm struct {
	key   string
	fn    Value
	item  Value
	index int
}

type armResult struct {
	value     Value
	err       error
	clock     int64
	cancelled bool
	settled   bool
}

// scope runs parallel, race, fanOut or conclave (LANG §7).
func (in *interp) scope(kind string, args []Value, br *branch) (Value, error) {
	sig := effects[kind]
	bag, err := optionBag(kind, argAt(args, sig.bagIndex))
	if err != nil {
		return nil, err
	}
	name, err := stepName(kind, field(bag, "name"), sig.nameRule == nameRequired)
	if err != nil {
		return nil, err
	}
	arms, isArray, err := in.arms(kind, args, bag, br)
	if err != nil {
		return nil, err
	}
	input := map[string]any{"kind": kind, "name": nil}
	if name != "" {
		input["name"] = name
	}
	if kind == "conclave" {
		members := []any{}
		if list, ok := argAt(args, 0).(*Array); ok {
			for i, m := range list.list() {
				id, e := agentID(m, fmt.Sprintf("conclave member %d", i))
				if e != nil {
					return nil, e
				}
				members = append(members, id)
			}
		} else {
			return nil, fault("L3041", "conclave needs a list of agent handles")
		}
		ch, e := canonOrNull(field(bag, "channel"), "conclave channel")
		if e != nil {
			return nil, e
		}
		input["subject"] = map[string]any{"members": members, "channel": ch}
	}
	if br.isCancelled() {
		return nil, errCancelled
	}
	br.markDispatched()
	key, occ := br.allocate(kind, name, true)
	hash, err := Digest(input)
	if err != nil {
		return nil, err
	}
	call := Call{Kind: kind, Name: name, Scope: br.path, Occurrence: occ, Key: key, InputHash: hash,
		RequestID: RequestID(in.opts.RunID, key, hash, 0), Input: input}
	entry := br.now()
	res, err := in.opts.Effects.Scope(br.context(in.ctx), call, func(ctx context.Context, opened any) (Result, error) {
		if kind == "conclave" {
			ch, cerr := fromCanon(opened)
			if cerr != nil {
				return Result{}, cerr
			}
			arms[0].item = ch
		}
		v, clock, losers, err := in.runArms(kind, key, arms, isArray, entry, br)
		branchKeys := make([]string, len(arms))
		for i, a := range arms {
			branchKeys[i] = a.key
		}
		if err != nil {
			return Result{EndedAt: clock, Branches: branchKeys, Losers: losers}, err
		}
		c, cerr := toCanon(v, key, map[any]bool{})
		if cerr != nil {
			return Result{EndedAt: clock, Branches: branchKeys, Losers: losers}, &EffectError{Code: "L4000", Kind: "scope-fault", Message: cerr.Error()}
		}
		return Result{Value: c, EndedAt: clock, Branches: branchKeys, Losers: losers}, nil
	})
	if err != nil {
		return nil, err
	}
	br.advance(res.EndedAt)
	return fromCanon(res.Value)
}

// arms lists a scope's branches with their keys, every key computed before
// any branch launches.
func (in *interp) arms(kind string, args []Value, bag *Record, br *branch) ([]arm, bool, error) {
	var out []arm
	isArray := false
	switch kind {
	case "parallel", "race":
		switch b := argAt(args, 0).(type) {
		case *Record:
			for _, k := range b.ownKeys() {
				fv, _ := b.get(k)
				out = append(out, arm{key: k, fn: fv, index: len(out)})
			}
		case *Array:
			isArray = true
			for i, fv := range b.list() {
				out = append(out, arm{key: numStr(float64(i)), fn: fv, index: i})
			}
		default:
			return nil, false, fault("L4011", "%s needs a record or an array of branch functions", kind)
		}
	case "fanOut":
		items, ok := argAt(args, 0).(*Array)
		if !ok {
			return nil, false, fault("L4016", "fanOut needs a list of items")
		}
		keyFn := field(bag, "key")
		seen := map[string]bool{}
		for i, item := range items.list() {
			var k string
			switch {
			case keyFn != Undefined:
				kv, err := in.call(keyFn, []Value{item}, br)
				if err != nil {
					return nil, false, err
				}
				s, err := keyString(kv)
				if err != nil {
					return nil, false, err
				}
				k = s
			default:
				r, ok := item.(*Record)
				id, isStr := field(r, "id").(string)
				if !ok || !isStr {
					return nil, false, fault("L3021", "fanOut item %d has no string id and there is no key option", i)
				}
				k = id
			}
			if seen[k] {
				return nil, false, fault("L3024", "fanOut branch key %q is not unique", k)
			}
			seen[k] = true
			out = append(out, arm{key: k, fn: argAt(args, 1), item: item, index: i})
		}
	case "conclave":
		out = []arm{{key: "in", fn: argAt(args, 1)}}
	}
	if kind == "race" && len(out) == 0 {
		return nil, false, fault("L4016", "race needs at least one branch")
	}
	for _, a := range out {
		if strings.ContainsAny(a.key, "/#:") {
			return nil, false, fault("L3025", "the branch key %q contains /, # or :", a.key)
		}
		if !isCallable(a.fn) {
			return nil, false, fault("L4011", "branch %q of %s is not a function", a.key, kind)
		}
	}
	return out, isArray, nil
}

// runArms runs a scope's branches concurrently and assembles its value.
func (in *interp) runArms(kind, key string, arms []arm, isArray bool, entry int64, br *branch) (Value, int64, []string, error) {
	results := make([]armResult, len(arms))
	branches := make([]*branch, len(arms))
	for i, a := range arms {
		branches[i] = newBranch(br, key+"/b:"+a.key, entry)
	}
	var wg sync.WaitGroup
	var once sync.Once
	for i, a := range arms {
		wg.Add(1)
		go func(i int, a arm) {
			defer wg.Done()
			var args []Value
			switch kind {
			case "fanOut":
				args = []Value{a.item, float64(a.index)}
			case "conclave":
				args = []Value{a.item}
			}
			v, err := in.call(a.fn, args, branches[i])
			branches[i].markDispatched()
			results[i] = armResult{value: v, err: err, clock: branches[i].now(), settled: true, cancelled: errors.Is(err, errCancelled)}
			if err != nil || kind == "race" {
				// The first failure cancels the rest; a race's first settle
				// cancels every sibling. As on a single-threaded engine,
				// every arm has first run up to its first effect.
				for _, b := range branches {
					<-b.dispatched
				}
				once.Do(func() {
					for j, b := range branches {
						if j != i {
							b.cancel()
						}
					}
				})
			}
		}(i, a)
	}
	wg.Wait()
	for _, b := range branches {
		if b.stop != nil {
			b.stop()
		}
	}
	clock := entry
	var losers []string
	for i, r := range results {
		if r.clock > clock {
			clock = r.clock
		}
		if r.cancelled {
			losers = append(losers, arms[i].key)
		}
	}
	// An uncatchable fault in any arm unwinds the run ahead of every winner.
	for _, r := range results {
		if r.err != nil && !r.cancelled && Uncatchable(r.err) {
			return nil, clock, losers, r.err
		}
	}
	switch kind {
	case "race":
		win := -1
		for i, r := range results {
			if r.cancelled || !r.settled {
				continue
			}
			if win < 0 || r.clock < results[win].clock {
				win = i
			}
		}
		if win < 0 {
			return nil, clock, losers, errCancelled
		}
		if results[win].err != nil {
			return nil, clock, losers, results[win].err
		}
		losers = losers[:0]
		for i := range arms {
			if i != win {
				losers = append(losers, arms[i].key)
			}
		}
		r := newRecord(br)
		r.set("index", arms[win].key)
		r.set("value", orNull(results[win].value))
		return r, clock, losers, nil
	}
	for _, r := range results {
		if r.err != nil && !r.cancelled {
			return nil, clock, losers, r.err
		}
	}
	switch {
	case kind == "conclave":
		return orNull(results[0].value), clock, losers, nil
	case kind == "fanOut" || isArray:
		a := &Array{owner: br}
		for _, r := range results {
			a.elems = append(a.elems, orNull(r.value))
		}
		return a, clock, losers, nil
	}
	rec := newRecord(br)
	idx := make([]int, len(arms))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return arms[idx[a]].index < arms[idx[b]].index })
	for _, i := range idx {
		rec.set(arms[i].key, orNull(results[i].value))
	}
	return rec, clock, losers, nil
}

// orNull stands a branch that produced no value in its slot as null.
func orNull(v Value) Value {
	if v == Undefined {
		return nil
	}
	return v
}
