package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cotal-ai/cotal/lang"
)

// Orphan verdicts of a migration check.
const (
	VerdictIgnored  = "ignored"
	VerdictKept     = "kept"
	VerdictRejected = "rejected"
)

// Orphan is a recorded step the edited program no longer reaches, and what the orphan
// table says about it.
type Orphan struct {
	Step    string `json:"step"`
	Kind    string `json:"kind"`
	Verdict string `json:"verdict"`
	Code    string `json:"code,omitempty"`
	Why     string `json:"why"`
}

// Divergence is the first recorded step whose inputs the edited program changes (L5001).
type Divergence struct {
	Step         string `json:"step"`
	RecordedHash string `json:"recordedHash"`
	ProgramHash  string `json:"programHash"`
}

// MigrateReport is the answer of a migration check: whether the edited program may take
// the run over (no divergence, no rejected orphan), how many recorded steps it accounts
// for, each orphan with its verdict, and the divergence. Nothing is written.
type MigrateReport struct {
	Run             string      `json:"run"`
	FromHash        string      `json:"fromHash,omitempty"`
	ToHash          string      `json:"toHash"`
	Admissible      bool        `json:"admissible"`
	ConsumedThrough int         `json:"consumedThrough"`
	Orphans         []Orphan    `json:"orphans"`
	Divergence      *Divergence `json:"divergence,omitempty"`
	// Fault is the program's own failure under the edited source, when it raised one
	// (the steps after it were not reached, which the orphans show).
	Fault string `json:"fault,omitempty"`
}

// errFrontier stops the dry walk at the first step the journal does not settle.
var errFrontier = errors.New("the dry walk reached the frontier")

// dryWalk answers settled steps from the journal and stops at anything else, recording
// which keys it looked up and which scopes it left unfinished.
type dryWalk struct {
	mu       sync.Mutex
	byKey    map[string]Entry
	seen     map[string]bool
	open     map[string]bool // scopes entered whose branches stopped at the frontier
	diverged *Divergence
}

func (w *dryWalk) look(c lang.Call) (Entry, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.byKey[c.Key]
	if !ok {
		return Entry{}, errFrontier
	}
	w.seen[c.Key] = true
	if e.InputHash != c.InputHash {
		if w.diverged == nil {
			w.diverged = &Divergence{Step: c.Key, RecordedHash: e.InputHash, ProgramHash: c.InputHash}
		}
		return Entry{}, fmt.Errorf("L5001: step %s diverged", c.Key)
	}
	return e, nil
}

func settledResult(e Entry) (lang.Result, error) {
	var end int64
	if e.EndedAt != nil {
		end = *e.EndedAt
	}
	switch e.Status {
	case "ok":
		var v any
		if len(e.Result) > 0 {
			if err := json.Unmarshal(e.Result, &v); err != nil {
				return lang.Result{}, fmt.Errorf("step %s: recorded result: %w", e.Key(), err)
			}
		}
		return lang.Result{Value: v, EndedAt: end}, nil
	case "failed":
		ee := &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: "step " + e.Key() + " failed"}
		if e.Error != nil {
			ee = &lang.EffectError{Code: e.Error.Code, Kind: e.Error.Kind, Message: e.Error.Message}
		}
		return lang.Result{}, ee
	}
	return lang.Result{}, errFrontier // pending, refused, cancelled: not a value the walk may use
}

func (w *dryWalk) Perform(_ context.Context, c lang.Call) (lang.Result, error) {
	e, err := w.look(c)
	if err != nil {
		return lang.Result{}, err
	}
	if e.State != "settled" {
		return lang.Result{}, errFrontier
	}
	return settledResult(e)
}

func (w *dryWalk) Scope(ctx context.Context, c lang.Call, run func(ctx context.Context, opened any) (lang.Result, error)) (lang.Result, error) {
	e, err := w.look(c)
	if err != nil {
		return lang.Result{}, err
	}
	// A migration walks into a scope even when it is settled: the steps under it are
	// checked (a changed input diverges) and accounted for, and the scope then answers its
	// recorded value.
	res, err := run(ctx, nil)
	if err != nil {
		w.mu.Lock()
		w.open[c.Key] = true
		w.mu.Unlock()
		return res, err
	}
	if e.State == "settled" && e.Status != "refused" {
		return settledResult(e)
	}
	return res, errFrontier
}

func (w *dryWalk) Log(string, string) {}

// Migrate checks whether an edited program may take a run over: it walks the program
// over the run's recorded journal, performing nothing, to the first step the journal does
// not settle. A recorded step whose inputs changed is a divergence (L5001); each recorded
// step the walk no longer reaches is classified by kind (the reference's orphan table):
// a sleep, wait, monitor, ask, waitUntil or a scope is ignored, a turn kept, a notify
// whose notices were not all consumed rejected (L5013), an open conclave rejected
// (L5014), a spawn rejected (L5003), a resolved checkpoint rejected (L5004), any other
// kind rejected (L5015). It reads; it never writes.
func (s *Space) Migrate(ctx context.Context, run string, prog *lang.Program) (MigrateReport, error) {
	if err := CheckID("run id", run); err != nil {
		return MigrateReport{}, err
	}
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return MigrateReport{}, err
	}
	ep := s.endpoint()
	var spec RunSpec
	if _, err := recs.Get(ctx, RunSpecKey(ep, run), &spec); err != nil {
		return MigrateReport{}, err
	}
	rep := MigrateReport{Run: run, ToHash: prog.Hash, Orphans: []Orphan{}}
	var program Program
	if _, err := recs.Get(ctx, ProgramKey(ep, run), &program); err == nil {
		if old, err := lang.Compile(program.Source); err == nil {
			rep.FromHash = old.Hash
		}
	}
	journal, _, err := Replay(ctx, s.JS, s.Name, run)
	if err != nil {
		return MigrateReport{}, err
	}
	entries := Folded(journal)
	w := &dryWalk{byKey: map[string]Entry{}, seen: map[string]bool{}, open: map[string]bool{}}
	for _, e := range entries {
		w.byKey[e.Key()] = e
	}
	p := spec.Pins
	err = prog.Run(ctx, lang.Options{RunID: run, Seed: p.Seed, StartedAt: p.StartedAt, StepBudget: p.StepBudget,
		EffectCeiling: p.EffectCeiling, Effects: w})
	var fault *lang.EffectError
	switch {
	case err == nil, errors.Is(err, errFrontier), w.diverged != nil:
	case errors.As(err, &fault):
		rep.Fault = fault.Error()
	case ctx.Err() != nil:
		return MigrateReport{}, ctx.Err()
	default:
		rep.Fault = err.Error()
	}
	rep.Divergence = w.diverged
	consumed, err := s.noticesConsumed(ctx, recs, run)
	if err != nil {
		return MigrateReport{}, err
	}
	for _, e := range entries {
		k := e.Key()
		if w.seen[k] || w.underOpen(k) {
			rep.ConsumedThrough++
			continue
		}
		rep.Orphans = append(rep.Orphans, classify(e, consumed))
	}
	rep.Admissible = rep.Divergence == nil
	for _, o := range rep.Orphans {
		if o.Verdict == VerdictRejected {
			rep.Admissible = false
		}
	}
	return rep, nil
}

// underOpen reports whether key sits under a scope the walk entered and left at the
// frontier: a branch not walked yet, not an orphan.
func (w *dryWalk) underOpen(key string) bool {
	for s := range w.open {
		if strings.HasPrefix(key, s+"/") {
			return true
		}
	}
	return false
}

// noticesConsumed answers, per step key, whether every notice the step filed was
// consumed (its status written).
func (s *Space) noticesConsumed(ctx context.Context, recs *Records, run string) (map[string]bool, error) {
	out := map[string]bool{}
	lister, err := recs.KV.ListKeysFiltered(ctx, "notice."+s.endpoint()+"."+run+".*.*.spec")
	if err != nil {
		return out, nil // no notices: none consumed
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var spec struct {
			Step string `json:"step"`
		}
		e, err := recs.KV.Get(ctx, k)
		if err != nil || json.Unmarshal(e.Value(), &spec) != nil {
			continue
		}
		_, serr := recs.KV.Get(ctx, strings.TrimSuffix(k, ".spec")+".status")
		prev, seen := out[spec.Step]
		out[spec.Step] = (prev || !seen) && serr == nil
	}
	return out, nil
}

func classify(e Entry, consumed map[string]bool) Orphan {
	o := Orphan{Step: e.Key(), Kind: e.Kind, Verdict: VerdictIgnored}
	reject := func(code, why string) Orphan {
		o.Verdict, o.Code, o.Why = VerdictRejected, code, why
		return o
	}
	switch e.Kind {
	case "sleep", "wait", "monitor", "ask", "waitUntil":
		o.Why = "nothing outlives it"
	case "parallel", "race", "fanOut":
		o.Why = "a scope leaves nothing of its own; the steps under it have their own rows"
	case "turn":
		o.Verdict, o.Why = VerdictKept, "the agent took this turn already; the entry stays in the journal"
	case "notify":
		c, ok := consumed[o.Step]
		switch {
		case ok && c:
			o.Why = "its notices were carried by the addressees' next turns already"
		case !ok:
			return reject("L5013", "no notice is filed for this step, so whether it was delivered cannot be known")
		default:
			return reject("L5013", "a notice of this step was not carried yet; migrating would deliver a decision the edited program no longer makes")
		}
	case "conclave":
		if len(e.Closed) > 0 && string(e.Closed) == "true" {
			o.Why = "the conclave closed; no membership outlives it"
		} else {
			return reject("L5014", "an open conclave is live membership the edited program cannot close")
		}
	case "spawn":
		return reject("L5003", "the edit drops a step that spawned a live agent (adopting or releasing it is not supported yet)")
	case "checkpoint":
		var r struct {
			Outcome string `json:"outcome"`
			By      string `json:"by"`
		}
		_ = json.Unmarshal(e.Result, &r)
		if r.Outcome != "resolved" {
			o.Why = "no decision by a person was recorded against it"
		} else {
			return reject("L5004", "the edit would discard a decision "+r.By+" made")
		}
	default:
		return reject("L5015", "no orphan policy is defined for a "+e.Kind+" entry")
	}
	return o
}
