package rundriver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

// drive is one driver's hold on one run: the journal folded by step key, its appender,
// and the status record it keeps.
type drive struct {
	cfg   Config
	log   *slog.Logger
	recs  *runstore.Records
	ap    *runstore.Appender
	run   string
	lease runstore.Lease
	spec  runstore.RunSpec

	runCtx context.Context // the drive's own context: an effect's ending alone means its branch was cancelled

	mu        sync.Mutex
	byKey     map[string]runstore.Entry
	keys      int64         // distinct step keys: the next entry's seq
	changed   chan struct{} // closed and replaced at every append: a wait on the journal wakes
	statusRev uint64
}

func newDrive(cfg Config, recs *runstore.Records, ap *runstore.Appender, run string, lease runstore.Lease, spec runstore.RunSpec, prefix []runstore.Record) *drive {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &drive{cfg: cfg, log: log, recs: recs, ap: ap, run: run, lease: lease, spec: spec, byKey: map[string]runstore.Entry{}, changed: make(chan struct{})}
	for _, r := range prefix {
		if r.Entry == nil {
			continue
		}
		k := r.Entry.Key()
		if _, ok := d.byKey[k]; !ok {
			d.keys++
		}
		d.byKey[k] = *r.Entry
	}
	return d
}

// drive records the run running under this lease, runs the program and records how it
// ended.
func (d *drive) drive(ctx context.Context, prog *lang.Program) (Outcome, error) {
	if err := d.status(ctx, runstore.StateRunning); err != nil {
		return Outcome{}, err
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	d.runCtx = ctx
	go d.watchSuperseded(ctx, stop)
	p := d.spec.Pins
	err := prog.Run(ctx, lang.Options{RunID: d.run, Seed: p.Seed, StartedAt: p.StartedAt, StepBudget: p.StepBudget,
		EffectCeiling: p.EffectCeiling, Effects: d})
	out := Outcome{Run: d.run, State: runstore.StateCompleted, Err: err}
	var held *heldError
	switch {
	case err == nil:
	case errors.As(err, &held):
		out.State, out.Held = runstore.StateReleased, held.refusal
	case errors.Is(err, runstore.ErrSuperseded), errors.Is(err, runstore.ErrStalled), ctx.Err() != nil:
		out.State = runstore.StateReleased
		if cause := context.Cause(ctx); errors.Is(cause, runstore.ErrSuperseded) {
			err, out.Err = cause, cause
		}
	default:
		out.State = runstore.StateFailed
	}
	d.mu.Lock()
	out.Steps = int(d.keys)
	d.mu.Unlock()
	if errors.Is(err, runstore.ErrSuperseded) {
		return out, nil // another driver holds the run and its status now
	}
	if out.State == runstore.StateReleased && out.Held == nil && d.cfg.LeaveRunning && ctx.Err() != nil {
		return out, nil // the host stops; its next start takes the run back
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if serr := d.status(sctx, out.State); serr != nil {
		return out, serr
	}
	return out, nil
}

// watchSuperseded ends the drive (stop with runstore.ErrSuperseded) once the run's
// status is written under a higher fencing token: a driver waiting on a pause learns of
// its successor at once, not at its next append, which the journal would refuse anyway.
func (d *drive) watchSuperseded(ctx context.Context, stop context.CancelCauseFunc) {
	w, err := d.recs.KV.Watch(ctx, runstore.RunStatusKey(d.cfg.endpoint(), d.run))
	if err != nil {
		d.log.Warn("run status watch", "run", d.run, "err", err)
		return
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ent, ok := <-w.Updates():
			if !ok {
				return
			}
			if ent == nil || len(ent.Value()) == 0 {
				continue
			}
			var st runstore.RunStatus
			if json.Unmarshal(ent.Value(), &st) == nil && st.FencingToken > d.lease.FencingToken {
				stop(fmt.Errorf("run %s is held by %s under fencing token %d: %w", d.run, st.Holder, st.FencingToken, runstore.ErrSuperseded))
				return
			}
		}
	}
}

// status writes the run's status under this lease by revision CAS, re-reading after a
// lost CAS; a status already written by a later lease means this driver is superseded.
func (d *drive) status(ctx context.Context, state string) error {
	key := runstore.RunStatusKey(d.cfg.endpoint(), d.run)
	for range 5 {
		d.mu.Lock()
		rev := d.statusRev
		d.mu.Unlock()
		st := runstore.RunStatus{V: 1, State: state, Holder: d.lease.Holder, Epoch: d.lease.Epoch,
			FencingToken: d.lease.FencingToken, JournalHigh: d.ap.High(), At: d.cfg.now()}
		n, err := d.recs.Update(ctx, key, st, rev)
		if err == nil {
			d.mu.Lock()
			if n > d.statusRev {
				d.statusRev = n
			}
			d.mu.Unlock()
			return nil
		}
		if !errors.Is(err, runstore.ErrConflict) {
			return err
		}
		var cur runstore.RunStatus
		cr, gerr := d.recs.Get(ctx, key, &cur)
		if gerr != nil {
			return fmt.Errorf("run %s status: %w", d.run, gerr)
		}
		if cur.FencingToken > d.lease.FencingToken {
			return fmt.Errorf("run %s status is held under fencing token %d: %w", d.run, cur.FencingToken, runstore.ErrSuperseded)
		}
		d.mu.Lock()
		d.statusRev = cr
		d.mu.Unlock()
	}
	return fmt.Errorf("run %s status: %w", d.run, runstore.ErrConflict)
}

// heldError releases the run at an effect this host refused.
type heldError struct{ refusal *lang.EffectError }

func (h *heldError) Error() string { return ErrHeld.Error() + ": " + h.refusal.Error() }
func (h *heldError) Unwrap() error { return ErrHeld }

// lookup answers the recorded entry of a step, refusing a changed input (L5001).
func (d *drive) lookup(c lang.Call) (runstore.Entry, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byKey[c.Key]
	if ok && e.InputHash != c.InputHash {
		return e, ok, fmt.Errorf("L5001: step %s diverged: its inputs hashed %s when recorded and %s now", c.Key, e.InputHash, c.InputHash)
	}
	return e, ok, nil
}

// append journals e (a new key takes the next seq) and keeps the status's journal high
// mark current.
func (d *drive) append(ctx context.Context, e runstore.Entry) (runstore.Entry, error) {
	if d.runCtx != nil {
		// The journal is the run's, not a branch's: a race's loser cancelled mid-append
		// must not abandon the publish, which would leave the appender stalled.
		ctx = d.runCtx
	}
	d.mu.Lock()
	if prev, ok := d.byKey[e.Key()]; ok {
		e.Seq = prev.Seq
	} else {
		e.Seq = d.keys
	}
	d.mu.Unlock()
	if _, err := d.ap.Append(ctx, e); err != nil {
		return e, err
	}
	d.mu.Lock()
	if _, ok := d.byKey[e.Key()]; !ok {
		d.keys++
	}
	d.byKey[e.Key()] = e
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	if err := d.status(ctx, runstore.StateRunning); err != nil {
		return e, err
	}
	return e, nil
}

func (d *drive) begin(ctx context.Context, c lang.Call) (runstore.Entry, error) {
	attempt := c.Attempt
	e := runstore.Entry{V: 1, Run: d.run, Scope: c.Scope, Kind: c.Kind, Name: c.Name, Occurrence: c.Occurrence,
		InputHash: c.InputHash, RequestID: c.RequestID, Attempt: &attempt, State: "pending", StartedAt: d.cfg.now()}
	return d.append(ctx, e)
}

func (d *drive) settle(ctx context.Context, e runstore.Entry, status string, result any, fail *lang.EffectError, endedAt int64) error {
	if d.cfg.BeforeSettle != nil {
		d.cfg.BeforeSettle(e.Key())
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	e.State, e.Status, e.EndedAt = "settled", status, &endedAt
	e.Result, e.Error = nil, nil
	if status == "ok" {
		b, err := json.Marshal(result)
		if err != nil {
			return fmt.Errorf("step %s: result: %w", e.Key(), err)
		}
		e.Result = b
	}
	if fail != nil {
		e.Error = &runstore.EntryError{Code: fail.Code, Kind: fail.Kind, Message: fail.Message}
	}
	_, err := d.append(ctx, e)
	return err
}

// replayed answers a settled entry as the program saw it the first time.
func replayed(e runstore.Entry) (lang.Result, error) {
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
		if e.Error == nil {
			return lang.Result{}, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: "step " + e.Key() + " failed with no error recorded"}
		}
		return lang.Result{}, &lang.EffectError{Code: e.Error.Code, Kind: e.Error.Kind, Message: e.Error.Message}
	}
	return lang.Result{}, lang.ErrCancelled
}

// Perform performs or replays one effect.
func (d *drive) Perform(ctx context.Context, c lang.Call) (lang.Result, error) {
	e, ok, err := d.lookup(c)
	if err != nil {
		return lang.Result{}, err
	}
	if ok && e.State == "settled" && e.Status != "refused" {
		return replayed(e)
	}
	switch {
	case !ok, e.Status == "refused":
		if e, err = d.begin(ctx, c); err != nil {
			return lang.Result{}, err
		}
	case c.Kind == "checkpoint" && attemptOf(e) > c.Attempt:
		// The first mint of an escalated checkpoint expired before the crash.
		return lang.Result{Value: map[string]any{"outcome": "expired", "at": float64(startOf(e))}, EndedAt: startOf(e)}, nil
	case c.Kind == "checkpoint" && attemptOf(e) < c.Attempt:
		e.RequestID, e.Attempt, e.External = c.RequestID, &c.Attempt, nil
		if e, err = d.append(ctx, e); err != nil {
			return lang.Result{}, err
		}
	}
	res, err := d.perform(ctx, c, e)
	if err != nil && ctx.Err() != nil && d.runCtx.Err() == nil {
		// The branch was cancelled (a race's loser) while the run goes on: withdraw
		// the step and settle it cancelled, so a resume never performs it again.
		if c.Kind == "turn" || c.Kind == "ask" {
			if x, ok := readSeatExternal(e); ok && d.cfg.Seats != nil {
				d.cfg.Seats.Cancel(d.run, x.Token)
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cur, ok, _ := d.lookup(c); ok && cur.State == "pending" {
			if serr := d.settle(cctx, cur, "cancelled", nil, nil, d.cfg.now()); serr != nil {
				return lang.Result{}, serr
			}
		}
		return lang.Result{}, lang.ErrCancelled
	}
	return res, err
}

func (d *drive) perform(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	switch c.Kind {
	case "sleep":
		return d.sleep(ctx, c, e)
	case "checkpoint":
		return d.checkpoint(ctx, c, e)
	case "notify":
		return d.notify(ctx, c, e)
	case "waitUntil":
		return d.waitUntilEffect(ctx, c, e)
	case "wait":
		ev, _ := c.Input["event"].(map[string]any)
		if ev["event"] == "message" || ev["event"] == "idle" {
			return d.waitChannel(ctx, c, e, ev)
		}
		if ev["event"] == "replied" || (ev["event"] == "down" && d.cfg.Seats != nil) {
			return d.wait(ctx, c, e, ev)
		}
	case "monitor":
		return d.monitor(ctx, c, e)
	case "spawn", "turn", "ask":
		if d.cfg.Seats == nil {
			break
		}
		switch c.Kind {
		case "spawn":
			return d.spawn(ctx, c, e)
		case "turn":
			return d.turn(ctx, c, e)
		}
		return d.ask(ctx, c, e)
	}
	refusal := &lang.EffectError{Code: "L5016", Kind: "refused",
		Message: c.Kind + " needs a host that performs it; this driver cannot, resume the run on a manager that does"}
	if err := d.settle(ctx, e, "refused", nil, refusal, d.cfg.now()); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{}, &heldError{refusal: refusal}
}

func attemptOf(e runstore.Entry) int {
	if e.Attempt == nil {
		return 0
	}
	return *e.Attempt
}

// startOf is when the open attempt began: its bind time, else the entry's start.
func startOf(e runstore.Entry) int64 {
	var x external
	if len(e.External) > 0 && json.Unmarshal(e.External, &x) == nil && x.Since > 0 {
		return x.Since
	}
	return e.StartedAt
}

// external is what a local checkpoint binds before it waits: its token, when the open
// attempt began and its deadline (ms), so a resume waits for the same answer until the
// same time.
type external struct {
	Token    string `json:"token"`
	Since    int64  `json:"since"`
	Deadline int64  `json:"deadline"`
	Prompt   string `json:"prompt,omitempty"`
}

// MaxPromptShown bounds the prompt a checkpoint's journal entry carries for `cotal run
// journal`.
const MaxPromptShown = 1024

// Prompt reads the prompt a local checkpoint bound on its entry, "" when none.
func Prompt(e runstore.Entry) string {
	var x external
	if len(e.External) == 0 || json.Unmarshal(e.External, &x) != nil {
		return ""
	}
	return x.Prompt
}

// Token is the token that answers a pending pause entry: the one it bound, else its
// request id.
func Token(e runstore.Entry) string {
	var x external
	if len(e.External) > 0 && json.Unmarshal(e.External, &x) == nil && x.Token != "" {
		return x.Token
	}
	return e.RequestID
}

func (d *drive) sleep(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	dur, err := lang.ParseDuration(fmt.Sprint(c.Input["duration"]))
	if err != nil {
		return lang.Result{}, &lang.EffectError{Code: "L4016", Kind: "bad-duration", Message: err.Error()}
	}
	until := e.StartedAt + dur
	if _, err := d.pause(ctx, e.RequestID, until, nil); err != nil {
		return lang.Result{}, err
	}
	if err := d.settle(ctx, e, "ok", nil, nil, until); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: nil, EndedAt: until}, nil
}

// waitUntil blocks until the host clock reaches at (ms), or ready closes.
func (d *drive) waitUntil(ctx context.Context, at int64, ready <-chan struct{}) error {
	for {
		left := at - d.cfg.now()
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(time.Duration(left)*time.Millisecond, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-ready:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (d *drive) checkpoint(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	var x external
	if len(e.External) == 0 || json.Unmarshal(e.External, &x) != nil || x.Token != e.RequestID {
		timeout := d.cfg.CheckpointTimeout
		if timeout <= 0 {
			timeout = DefaultCheckpointTimeout
		}
		if s, ok := c.Input["timeout"].(string); ok {
			ms, err := lang.ParseDuration(s)
			if err != nil {
				return lang.Result{}, &lang.EffectError{Code: "L4016", Kind: "bad-duration", Message: err.Error()}
			}
			timeout = time.Duration(ms) * time.Millisecond
		}
		now := d.cfg.now()
		prompt, _ := c.Input["prompt"].(string)
		if len(prompt) > MaxPromptShown {
			prompt = strings.ToValidUTF8(prompt[:MaxPromptShown], "")
		}
		x = external{Token: e.RequestID, Since: now, Deadline: now + timeout.Milliseconds(), Prompt: prompt}
		b, _ := json.Marshal(x)
		e.External = b
		var err error
		if e, err = d.append(ctx, e); err != nil {
			return lang.Result{}, err
		}
	}
	if err := d.ensureCP(ctx, x); err != nil {
		d.log.Warn("checkpoint plane", "run", d.run, "step", c.Key, "err", err)
	}
	if d.cfg.OnCheckpoint != nil {
		d.cfg.OnCheckpoint(c.Key, x.Prompt)
	}
	ans, err := d.awaitAnswer(ctx, x)
	if err != nil {
		return lang.Result{}, err
	}
	settle, answerID, ts := "expired", "", x.Deadline
	if ans != nil {
		settle, answerID, ts = "resumed", ans.AnswerID, ans.At
	}
	won, err := d.settleCP(ctx, x, settle, answerID, ts)
	switch {
	case err != nil && ctx.Err() != nil:
		return lang.Result{}, ctx.Err()
	case err != nil:
		// The plane is the reference's readers' view; the journal settles without it.
		d.log.Warn("checkpoint plane", "run", d.run, "step", c.Key, "err", err)
	case won.Settle == runstore.CheckpointExpired && ans != nil:
		// Expired on the plane first (by this run's driver before a crash): no answer
		// was presented in time, whatever record was filed since.
		ans = nil
	case won.Settle == runstore.CheckpointResumed && (ans == nil || ans.AnswerID != won.AnswerID):
		// An answerer presented the token first (the wait ended on the fire or the clock
		// just before it, or two answers were filed at once): the answer it resumed with
		// is the outcome, as on the plane.
		var a runstore.Answer
		if _, err := d.recs.Get(ctx, runstore.AnswerKey(d.cfg.endpoint(), x.Token, won.AnswerID), &a); err != nil {
			return lang.Result{}, fmt.Errorf("checkpoint %s: the answer %s it resumed with: %w", c.Key, won.AnswerID, err)
		}
		ans = &a
	}
	if ans == nil {
		out := map[string]any{"outcome": "expired", "at": float64(x.Deadline)}
		if c.Attempt == 0 && c.Input["onExpiry"] == "escalate" {
			// The entry stays open: the escalation's second mint settles it.
			return lang.Result{Value: out, EndedAt: x.Deadline}, nil
		}
		if err := d.settle(ctx, e, "ok", out, nil, x.Deadline); err != nil {
			return lang.Result{}, err
		}
		return lang.Result{Value: out, EndedAt: x.Deadline}, nil
	}
	out := map[string]any{"outcome": "resolved", "by": ans.By, "answerId": ans.AnswerID, "at": float64(ans.At)}
	if len(ans.Value) > 0 {
		var v any
		if err := json.Unmarshal(ans.Value, &v); err != nil {
			return lang.Result{}, fmt.Errorf("checkpoint %s: answer %s: %w", c.Key, ans.AnswerID, err)
		}
		out["value"] = v
	}
	if ans.Artifact != "" {
		out["artifact"] = ans.Artifact
	}
	end := max(ans.At, startOf(e))
	if err := d.settle(ctx, e, "ok", out, nil, end); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: out, EndedAt: end}, nil
}

// awaitAnswer waits for the first answer to the token (amendments aside) until the
// deadline; nil means it expired. The answers filed before the wait began (while no
// driver ran) are read before the checkpoint is called expired, so an answer filed in
// time is its outcome even when the deadline or its fire is found first.
func (d *drive) awaitAnswer(ctx context.Context, x external) (*runstore.Answer, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := d.recs.KV.Watch(wctx, runstore.AnswerFilter(d.cfg.endpoint(), x.Token), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: watch answers: %w", x.Token, err)
	}
	defer func() { _ = w.Stop() }()
	ready, loaded := make(chan struct{}), make(chan struct{})
	var ans *runstore.Answer
	go func() {
		isLoaded := false
		for ent := range w.Updates() {
			if ent == nil { // the answers filed before the watch began are all read
				if !isLoaded {
					isLoaded = true
					close(loaded)
				}
				continue
			}
			var a runstore.Answer
			if err := json.Unmarshal(ent.Value(), &a); err != nil || a.Token != x.Token || a.Supersedes != "" {
				d.log.Warn("run answer ignored", "run", d.run, "key", ent.Key(), "err", err)
				continue
			}
			ans = &a
			close(ready)
			return
		}
	}()
	if _, err := d.pause(ctx, x.Token, x.Deadline, ready); err != nil {
		return nil, err
	}
	select {
	case <-ready:
	case <-loaded:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-ready:
		return ans, nil
	default:
		return nil, nil
	}
}

// notify files one notice record per addressee, create-only, so a resumed notify files
// the same records again harmlessly.
func (d *drive) notify(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	agents, _ := c.Input["agents"].([]any)
	at := d.cfg.now()
	for _, a := range agents {
		agent, _ := a.(string)
		addressee := digest43(map[string]any{"agent": agent})
		id := digest43(map[string]any{"requestId": e.RequestID, "addressee": agent})
		key := "notice." + d.cfg.endpoint() + "." + d.run + "." + addressee + "." + id + ".spec"
		n := map[string]any{"v": 1, "run": d.run, "step": c.Key, "addressee": agent, "fact": c.Input["fact"], "at": e.StartedAt}
		if err := d.recs.Create(ctx, key, n); err != nil {
			return lang.Result{}, fmt.Errorf("notify %s: %w", c.Key, err)
		}
	}
	if err := d.settle(ctx, e, "ok", nil, nil, at); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{EndedAt: at}, nil
}

func digest43(v any) string {
	b, err := lang.Canonical(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])[:43]
}

// Scope opens a concurrency scope: a settled one answers its recorded value, any other
// runs its branches and is journaled pending before and settled after.
func (d *drive) Scope(ctx context.Context, c lang.Call, run func(ctx context.Context, opened any) (lang.Result, error)) (lang.Result, error) {
	e, ok, err := d.lookup(c)
	if err != nil {
		return lang.Result{}, err
	}
	if ok && e.State == "settled" && e.Status != "refused" {
		return replayed(e)
	}
	if !ok || e.Status == "refused" {
		if e, err = d.begin(ctx, c); err != nil {
			return lang.Result{}, err
		}
	}
	if c.Kind == "conclave" {
		return d.conclave(ctx, c, e, run)
	}
	res, err := run(ctx, nil)
	var fail *lang.EffectError
	switch {
	case errors.As(err, &fail):
		if serr := d.settle(ctx, e, "failed", nil, fail, d.cfg.now()); serr != nil {
			return lang.Result{}, serr
		}
		return lang.Result{}, err
	case err != nil:
		if d.runCtx.Err() == nil && (ctx.Err() != nil || errors.Is(err, lang.ErrCancelled)) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if serr := d.settle(cctx, e, "cancelled", nil, nil, d.cfg.now()); serr != nil {
				return lang.Result{}, serr
			}
			return lang.Result{}, lang.ErrCancelled
		}
		return lang.Result{}, err
	}
	end := max(res.EndedAt, e.StartedAt)
	if len(res.Losers) > 0 {
		e.Cancel, _ = json.Marshal(map[string]any{"losers": res.Losers, "issued": true})
	}
	if err := d.settle(ctx, e, "ok", res.Value, nil, end); err != nil {
		return lang.Result{}, err
	}
	res.EndedAt = end
	return res, nil
}

// Log hands a program's log line to the configured sink; it is not journaled.
func (d *drive) Log(scope, line string) {
	if d.cfg.Log != nil {
		d.cfg.Log(scope, line)
	}
}
