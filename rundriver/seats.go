package rundriver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

// DefaultTurnDeadline is the deadline of a turn or an ask whose program names none.
const DefaultTurnDeadline = time.Hour

// Seats performs the effects that reach a seat: the manager hosting a run implements it.
// Every call is keyed by the step's request id (its goal id), so a resumed step that
// calls again attaches to the work the first call started instead of starting more.
type Seats interface {
	// Spawn brings a seat in for a run, or answers the seat the same request id already
	// brought in. A refusal the program can catch is a *lang.EffectError (L4002).
	Spawn(ctx context.Context, r SpawnRequest) (Handle, error)
	// Turn hands a seat one turn and waits until it yields, the deadline passes
	// (L4003) or ctx ends. A turn of the same goal id already handed attaches.
	Turn(ctx context.Context, r TurnRequest) (TurnResult, error)
	// Cancel withdraws a turn not yet yielded (a race loser's); unknown ids are ignored.
	Cancel(run, goalID string)
	// Down waits until the seat agent of the run has ended and answers when (unix ms).
	Down(ctx context.Context, run, agent string) (int64, error)
}

// SpawnRequest is a spawn as a program may ask it: a persona the operator wrote, and a
// model. The program chooses nothing else of how the seat runs.
type SpawnRequest struct {
	Run       string
	Step      string // the step key
	RequestID string
	Persona   string
	Model     string
}

// Handle is the seat a spawn answered, the value the program holds.
type Handle struct {
	Agent   string `json:"agent"`
	Persona string `json:"persona"`
	Role    string `json:"role,omitempty"`
}

// TurnRequest is one turn handed to a seat.
type TurnRequest struct {
	Run      string
	Step     string // the step key
	GoalID   string // the step's request id (an ask attempt's token)
	Agent    string // the seat's name, from its handle
	Payload  string // what the seat reads
	Deadline int64  // absolute, unix ms
	// Ask, for an ask, is what the seat's answer must be: its yield carries a value that
	// conforms, which the manager files as the answer to Ask.Token.
	Ask *AskTurn
}

// AskTurn is the typed answer an ask waits for.
type AskTurn struct {
	Endpoint string         // the records endpoint
	Token    string         // the pause token the answer is filed under
	Schema   map[string]any // the schema shorthand: field -> type name
}

// TurnResult is how a seat ended its turn.
type TurnResult struct {
	Status string `json:"status"` // done, blocked or handoff
	To     string `json:"to,omitempty"`
	Note   string `json:"note,omitempty"`
	At     int64  `json:"at"`
}

// shorthandTypes are the type names of the ask schema shorthand (LANG §6.5).
var shorthandTypes = map[string]bool{"string": true, "number": true, "boolean": true, "array": true, "record": true, "null": true}

// CheckSchema reads an ask's schema shorthand: a record of required fields, each naming
// one of string, number, boolean, array, record or null. An unreadable schema is L4022.
func CheckSchema(schema any) (map[string]any, error) {
	s, ok := schema.(map[string]any)
	if !ok || len(s) == 0 {
		return nil, &lang.EffectError{Code: "L4022", Kind: "bad-schema", Message: "an ask's schema is a record of fields, each naming string, number, boolean, array, record or null"}
	}
	for k, v := range s {
		t, ok := v.(string)
		if !ok || !shorthandTypes[t] {
			return nil, &lang.EffectError{Code: "L4022", Kind: "bad-schema", Message: fmt.Sprintf("the schema field %q names %v, not one of string, number, boolean, array, record or null", k, v)}
		}
	}
	return s, nil
}

// CheckAnswer reports why value does not conform to the schema shorthand: every field
// present with its type, no other field. "" means it conforms.
func CheckAnswer(schema map[string]any, value any) string {
	rec, ok := value.(map[string]any)
	if !ok {
		return "the answer must be a record with the fields " + fieldList(schema)
	}
	for k, t := range schema {
		v, present := rec[k]
		if !present {
			return fmt.Sprintf("the answer lacks the field %q (%v)", k, t)
		}
		if !isType(v, t.(string)) {
			return fmt.Sprintf("the field %q must be a %v", k, t)
		}
	}
	for k := range rec {
		if _, ok := schema[k]; !ok {
			return fmt.Sprintf("the answer has a field %q the schema does not name (%s)", k, fieldList(schema))
		}
	}
	return ""
}

func isType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "record":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func fieldList(schema map[string]any) string {
	keys := make([]string, 0, len(schema))
	for k, t := range schema {
		keys = append(keys, fmt.Sprintf("%s: %v", k, t))
	}
	sort.Strings(keys)
	return "{" + strings.Join(keys, ", ") + "}"
}

// derivedToken is a secondary pause token of a step: base64url(SHA-256("<requestId>:<purpose>")).
func derivedToken(requestID, purpose string) string {
	sum := sha256.Sum256([]byte(requestID + ":" + purpose))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// AskToken is the pause token of attempt n (from 1) of an ask: the request id itself
// for the first, derived with "ask-attempt-<n>" for the others.
func AskToken(requestID string, n int) string {
	if n <= 1 {
		return requestID
	}
	return derivedToken(requestID, fmt.Sprintf("ask-attempt-%d", n))
}

// RunCaller is the run-stable principal actor a run's seats are spawned under:
// wf_<first 12 hex of SHA-256(runId)>.
func RunCaller(run string) string {
	sum := sha256.Sum256([]byte(run))
	return "wf_" + hex.EncodeToString(sum[:])[:12]
}

// seatExternal is what a seat effect binds on its pending entry before it dispatches:
// the goal (the turn's or the ask attempt's token), the one absolute deadline, the ask
// attempt and why the last answer was refused; a resume re-attaches to the same goal
// until the same deadline.
type seatExternal struct {
	Token    string `json:"token"`
	Agent    string `json:"agent,omitempty"` // a turn's seat, for wait(replied(...))
	Since    int64  `json:"since"`
	Deadline int64  `json:"deadline"`
	Attempt  int    `json:"askAttempt,omitempty"`
	Refused  string `json:"refused,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
}

func readSeatExternal(e runstore.Entry) (seatExternal, bool) {
	var x seatExternal
	if len(e.External) == 0 || json.Unmarshal(e.External, &x) != nil || x.Token == "" {
		return x, false
	}
	return x, true
}

// bindSeat appends e pending again with x bound, so a crash after dispatch resumes on x.
func (d *drive) bindSeat(ctx context.Context, e runstore.Entry, x seatExternal) (runstore.Entry, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return e, err
	}
	e.External = b
	return d.append(ctx, e)
}

// deadlineOf reads a turn's or ask's deadline option, DefaultTurnDeadline when absent.
func deadlineOf(c lang.Call) (int64, error) {
	s, ok := c.Input["deadline"].(string)
	if !ok {
		return DefaultTurnDeadline.Milliseconds(), nil
	}
	ms, err := lang.ParseDuration(s)
	if err != nil {
		return 0, &lang.EffectError{Code: "L4016", Kind: "bad-duration", Message: err.Error()}
	}
	return ms, nil
}

// failStep settles e failed with fail and answers fail to the program.
func (d *drive) failStep(ctx context.Context, e runstore.Entry, fail *lang.EffectError) (lang.Result, error) {
	if err := d.settle(ctx, e, "failed", nil, fail, d.cfg.now()); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{}, fail
}

// unserved are the spawn options this host does not perform yet: a program naming one
// gets a catchable refusal rather than a seat set up otherwise than it asked.
var unserved = []string{"worktree", "join", "placement", "cwd", "variant", "permits", "supervise", "onFork", "events"}

func (d *drive) spawn(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	persona, _ := c.Input["persona"].(string)
	model, _ := c.Input["model"].(string)
	var bag map[string]any
	if len(c.Args) > 1 {
		bag, _ = c.Args[1].(map[string]any)
	}
	for _, k := range unserved {
		if v, ok := bag[k]; ok && v != nil {
			return d.failStep(ctx, e, &lang.EffectError{Code: "L4002", Kind: "spawn-refused",
				Message: fmt.Sprintf("spawn %s: this manager does not serve the option %s on a run's spawn yet", persona, k)})
		}
	}
	if v, ok := c.Input["variant"]; ok && v != nil {
		return d.failStep(ctx, e, &lang.EffectError{Code: "L4002", Kind: "spawn-refused", Message: "spawn " + persona + ": model variants are not served yet; name the model"})
	}
	h, err := d.cfg.Seats.Spawn(ctx, SpawnRequest{Run: d.run, Step: c.Key, RequestID: e.RequestID, Persona: persona, Model: model})
	var fail *lang.EffectError
	switch {
	case errors.As(err, &fail):
		return d.failStep(ctx, e, fail)
	case err != nil:
		return lang.Result{}, err
	}
	if role, ok := c.Input["role"].(string); ok && role != h.Role {
		return d.failStep(ctx, e, &lang.EffectError{Code: "L4002", Kind: "spawn-refused",
			Message: fmt.Sprintf("spawn %s: the persona fixes the role %q, not %q", persona, h.Role, role)})
	}
	out := map[string]any{"agent": h.Agent, "persona": h.Persona}
	if h.Role != "" {
		out["role"] = h.Role
	}
	at := d.cfg.now()
	if err := d.settle(ctx, e, "ok", out, nil, at); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: out, EndedAt: at}, nil
}

// turnPayload is what a seat reads for a turn (the reference's payload format was not
// located; this one names the run, the step and how to yield).
func turnPayload(run, step, goal, ask string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow run %s, step %s: it is your turn %q.\n", run, step, goal)
	if ask != "" {
		fmt.Fprintf(&b, "The run asks you for a record %s. When you have it, call cotal_yield with turn %q, status \"done\" and value set to that record.\n", ask, goal)
	} else {
		fmt.Fprintf(&b, "Do the work your task asks for, then call cotal_yield with turn %q and status done, blocked (with a note) or handoff (with to).\n", goal)
	}
	return b.String()
}

func (d *drive) turn(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	agent, _ := c.Input["agent"].(string)
	x, bound := readSeatExternal(e)
	if !bound {
		dl, err := deadlineOf(c)
		if err != nil {
			return d.failStep(ctx, e, err.(*lang.EffectError))
		}
		now := d.cfg.now()
		x = seatExternal{Token: e.RequestID, Agent: agent, Since: now, Deadline: now + dl}
		if e, err = d.bindSeat(ctx, e, x); err != nil {
			return lang.Result{}, err
		}
	}
	res, err := d.handTurn(ctx, TurnRequest{Run: d.run, Step: c.Key, GoalID: x.Token, Agent: agent,
		Payload: turnPayload(d.run, c.Key, x.Token, ""), Deadline: x.Deadline})
	var fail *lang.EffectError
	switch {
	case errors.As(err, &fail):
		return d.failStep(ctx, e, fail)
	case err != nil:
		return lang.Result{}, err
	}
	out := map[string]any{"status": res.Status, "at": float64(res.At)}
	if res.To != "" {
		out["to"] = res.To
	}
	if res.Note != "" {
		out["note"] = res.Note
	}
	end := max(res.At, x.Since)
	if err := d.settle(ctx, e, "ok", out, nil, end); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: out, EndedAt: end}, nil
}

// cancelGrace bounds how long a turn withdrawn at its deadline is waited on to answer
// how it ended: a yield that came first still stands.
const cancelGrace = firePoll

// handTurn hands a turn and times its deadline on the timer plane (timer id the goal id,
// the step's request id) and by the driver's clock, as pause does, beside the seat host's
// own timing. Whichever ends the turn first ends it; at the deadline the turn is
// withdrawn, and its yield, if the seat gave one first, is still its outcome; else the
// turn is L4003. A resumed driver that finds the deadline's fire, recorded while no driver
// ran, ends the turn so.
func (d *drive) handTurn(ctx context.Context, r TurnRequest) (TurnResult, error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type turned struct {
		res TurnResult
		err error
	}
	done := make(chan turned, 1)
	go func() {
		res, err := d.cfg.Seats.Turn(tctx, r)
		done <- turned{res, err}
	}()
	expired := d.deadline(tctx, r.GoalID, r.Deadline)
	select {
	case t := <-done:
		return t.res, t.err
	case <-expired:
	case <-ctx.Done():
		return TurnResult{}, ctx.Err()
	}
	d.cfg.Seats.Cancel(d.run, r.GoalID)
	grace := time.NewTimer(cancelGrace)
	defer grace.Stop()
	select {
	case t := <-done:
		if t.err == nil {
			return t.res, nil
		}
	case <-grace.C:
	case <-ctx.Done():
		return TurnResult{}, ctx.Err()
	}
	return TurnResult{}, &lang.EffectError{Code: "L4003", Kind: "deadline", Message: "turn " + r.Step + " was not yielded before its deadline"}
}

// deadline times the pause timer until at (ms) on the timer plane and the driver's clock;
// the channel closes when it passes, and never when ctx ends first.
func (d *drive) deadline(ctx context.Context, timer string, at int64) <-chan struct{} {
	expired := make(chan struct{})
	go func() {
		if _, err := d.pause(ctx, timer, at, nil); err == nil {
			close(expired)
		}
	}()
	return expired
}

// ask hands the seat one turn per attempt and waits for an answer filed under that
// attempt's token (by the seat's cotal_yield, or by `cotal run answer`), checked against
// the schema; a refused answer costs the attempt, the last one is L4006, and the one
// deadline of the whole ask is L4003.
func (d *drive) ask(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	agent, _ := c.Input["agent"].(string)
	schema, err := CheckSchema(c.Input["schema"])
	if err != nil {
		return d.failStep(ctx, e, err.(*lang.EffectError))
	}
	attempts := 1
	if n, ok := c.Input["attempts"].(float64); ok && n >= 1 {
		attempts = int(n)
	}
	x, bound := readSeatExternal(e)
	if !bound {
		dl, err := deadlineOf(c)
		if err != nil {
			return d.failStep(ctx, e, err.(*lang.EffectError))
		}
		now := d.cfg.now()
		x = seatExternal{Token: AskToken(e.RequestID, 1), Since: now, Deadline: now + dl, Attempt: 1}
		if e, err = d.bindSeat(ctx, e, x); err != nil {
			return lang.Result{}, err
		}
	}
	for {
		ans, why, err := d.askAttempt(ctx, c, agent, schema, x)
		if err != nil {
			return lang.Result{}, err
		}
		if ans == nil && why == "" {
			return d.failStep(ctx, e, &lang.EffectError{Code: "L4003", Kind: "deadline", Message: "ask " + c.Key + " got no answer before its deadline"})
		}
		if why == "" {
			end := max(ans.At, x.Since)
			var v any
			if err := json.Unmarshal(ans.Value, &v); err != nil {
				return lang.Result{}, fmt.Errorf("ask %s: answer %s: %w", c.Key, ans.AnswerID, err)
			}
			if err := d.settle(ctx, e, "ok", v, nil, end); err != nil {
				return lang.Result{}, err
			}
			return lang.Result{Value: v, EndedAt: end}, nil
		}
		if x.Attempt >= attempts {
			return d.failStep(ctx, e, &lang.EffectError{Code: "L4006", Kind: "attempts-exhausted",
				Message: fmt.Sprintf("ask %s: %d attempt(s) answered nothing that conforms; the last: %s", c.Key, attempts, why)})
		}
		x.Attempt++
		x.Token, x.Refused = AskToken(e.RequestID, x.Attempt), why
		if e, err = d.bindSeat(ctx, e, x); err != nil {
			return lang.Result{}, err
		}
	}
}

// askAttempt runs one attempt: it hands the turn and waits for the first answer under
// the attempt's token. It answers the conforming answer, or why the attempt is spent
// (a refused answer, a turn yielded with none), or (nil, "") when the deadline passed.
func (d *drive) askAttempt(ctx context.Context, c lang.Call, agent string, schema map[string]any, x seatExternal) (*runstore.Answer, string, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	turned := make(chan error, 1)
	go func() {
		_, err := d.cfg.Seats.Turn(actx, TurnRequest{Run: d.run, Step: c.Key, GoalID: x.Token, Agent: agent,
			Payload: turnPayload(d.run, c.Key, x.Token, fieldList(schema)), Deadline: x.Deadline,
			Ask: &AskTurn{Endpoint: d.cfg.endpoint(), Token: x.Token, Schema: schema}})
		turned <- err
	}()
	answers, err := d.watchAnswers(actx, x.Token)
	if err != nil {
		return nil, "", err
	}
	// The attempt's pause is its token's, until the ask's one deadline.
	expired := d.deadline(actx, x.Token, x.Deadline)
	check := func(a *runstore.Answer) string {
		var v any
		if err := json.Unmarshal(a.Value, &v); err != nil || len(a.Value) == 0 {
			return "the answer carries no value"
		}
		return CheckAnswer(schema, v)
	}
	for {
		select {
		case a := <-answers:
			if a.By != "local."+agent {
				// Answered from elsewhere (cotal run answer): the seat's turn is moot.
				d.cfg.Seats.Cancel(d.run, x.Token)
			}
			return a, check(a), nil
		case <-expired:
			// An answer filed in time (while no driver ran, say) is the attempt's outcome
			// even when the deadline's fire is found first.
			if a, err := d.firstAnswer(ctx, x.Token); err != nil || a != nil {
				if a == nil {
					return nil, "", err
				}
				return a, check(a), nil
			}
			d.cfg.Seats.Cancel(d.run, x.Token)
			return nil, "", nil
		case err := <-turned:
			// The seat yields after it files its answer: an answer it gave is in the
			// bucket by now, whatever the turn says (a resumed ask finds it so).
			a, lerr := d.firstAnswer(ctx, x.Token)
			if lerr != nil {
				return nil, "", lerr
			}
			if a != nil {
				return a, check(a), nil
			}
			var fail *lang.EffectError
			switch {
			case errors.As(err, &fail) && fail.Code == "L4003":
				return nil, "", nil
			case errors.As(err, &fail):
				return nil, fail.Message, nil
			case err != nil:
				return nil, "", err
			}
			return nil, "the seat ended its turn without an answer", nil
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

// firstAnswer reads the first answer (amendments aside) filed under token, nil when none.
func (d *drive) firstAnswer(ctx context.Context, token string) (*runstore.Answer, error) {
	list, err := d.recs.Answers(ctx, d.cfg.endpoint(), token)
	if err != nil {
		return nil, fmt.Errorf("answers of %s: %w", token, err)
	}
	for i := range list {
		if list[i].Supersedes == "" {
			return &list[i], nil
		}
	}
	return nil, nil
}

// watchAnswers delivers the first answers (amendments aside) filed under token.
func (d *drive) watchAnswers(ctx context.Context, token string) (<-chan *runstore.Answer, error) {
	w, err := d.recs.KV.Watch(ctx, runstore.AnswerFilter(d.cfg.endpoint(), token))
	if err != nil {
		return nil, fmt.Errorf("watch answers of %s: %w", token, err)
	}
	out := make(chan *runstore.Answer, 1)
	go func() {
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
				var a runstore.Answer
				if err := json.Unmarshal(ent.Value(), &a); err != nil || a.Token != token || a.Supersedes != "" {
					continue
				}
				select {
				case out <- &a:
				case <-ctx.Done():
				}
				return
			}
		}
	}()
	return out, nil
}

// waitUntilEffect observes the probe every `every` from the step's start until an
// observation is terminal (its value is the result) or the deadline passes (L4003).
// Observations run on the run clock of the step, so a resume observes on the same
// cadence until the same deadline.
func (d *drive) waitUntilEffect(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	every, _ := lang.ParseDuration(fmt.Sprint(c.Input["every"]))
	deadline, _ := lang.ParseDuration(fmt.Sprint(c.Input["deadline"]))
	if c.Observe == nil || every <= 0 {
		return d.failStep(ctx, e, &lang.EffectError{Code: "L4024", Kind: "bad-probe", Message: "waitUntil " + c.Key + " has no probe to observe"})
	}
	for n := 0; ; n++ {
		at := e.StartedAt + int64(n)*every
		if at > e.StartedAt+deadline {
			return d.failStep(ctx, e, &lang.EffectError{Code: "L4003", Kind: "deadline", Message: "waitUntil " + c.Key + " saw no terminal observation before its deadline"})
		}
		if err := d.waitUntil(ctx, at, nil); err != nil {
			return lang.Result{}, err
		}
		v, done, err := c.Observe(ctx, n)
		if err != nil {
			return lang.Result{}, err
		}
		if done {
			if err := d.settle(ctx, e, "ok", v, nil, at); err != nil {
				return lang.Result{}, err
			}
			return lang.Result{Value: v, EndedAt: at}, nil
		}
	}
}

// wait resolves an event: replied(agent), the latest turn this run's journal settled for
// that seat (a level: a reply that exists resolves at once), or down(agent), the seat's
// end; or null once its timeout (one absolute deadline, bound before it waits) passes.
func (d *drive) wait(ctx context.Context, c lang.Call, e runstore.Entry, ev map[string]any) (lang.Result, error) {
	agent, _ := ev["agent"].(string)
	x, bound := readSeatExternal(e)
	if !bound {
		now := d.cfg.now()
		x = seatExternal{Token: derivedToken(e.RequestID, "wait-timeout"), Since: now}
		if s, ok := c.Input["timeout"].(string); ok {
			ms, err := lang.ParseDuration(s)
			if err != nil {
				return d.failStep(ctx, e, &lang.EffectError{Code: "L4016", Kind: "bad-duration", Message: err.Error()})
			}
			x.Deadline = now + ms
		}
		var err error
		if e, err = d.bindSeat(ctx, e, x); err != nil {
			return lang.Result{}, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := make(chan struct{})
	if x.Deadline > 0 {
		go func() {
			if _, err := d.pause(wctx, x.Token, x.Deadline, nil); err == nil {
				close(timedOut)
			}
		}()
	}
	var (
		v   map[string]any
		at  int64
		err error
	)
	if ev["event"] == "down" {
		type downAt struct {
			at  int64
			err error
		}
		ended := make(chan downAt, 1)
		go func() {
			a, e := d.cfg.Seats.Down(wctx, d.run, agent)
			ended <- downAt{a, e}
		}()
		select {
		case r := <-ended:
			at, err = r.at, r.err
			if err == nil {
				v = map[string]any{"agent": agent, "reason": "lapsed", "at": float64(at)}
			}
		case <-timedOut:
		case <-ctx.Done():
			return lang.Result{}, ctx.Err()
		}
	} else {
		for {
			d.mu.Lock()
			v, at = d.lastReply(agent)
			changed := d.changed
			d.mu.Unlock()
			if v != nil {
				break
			}
			select {
			case <-changed:
				continue
			case <-timedOut:
			case <-ctx.Done():
				return lang.Result{}, ctx.Err()
			}
			break
		}
	}
	var fail *lang.EffectError
	switch {
	case errors.As(err, &fail):
		return d.failStep(ctx, e, fail)
	case err != nil && ctx.Err() == nil:
		return lang.Result{}, err
	}
	end := x.Deadline
	if v != nil {
		end = max(at, x.Since)
	}
	var out any
	if v != nil {
		out = v
	}
	if err := d.settle(ctx, e, "ok", out, nil, end); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: out, EndedAt: end}, nil
}

// lastReply is the latest turn of agent this run settled ok, as wait(replied) answers it:
// {agent, status, note?, at}. d.mu must be held.
func (d *drive) lastReply(agent string) (map[string]any, int64) {
	var best map[string]any
	var bestAt int64
	for _, e := range d.byKey {
		if e.Kind != "turn" || e.State != "settled" || e.Status != "ok" {
			continue
		}
		if x, ok := readSeatExternal(e); !ok || x.Agent != agent {
			continue
		}
		var r map[string]any
		if json.Unmarshal(e.Result, &r) != nil {
			continue
		}
		at, _ := r["at"].(float64)
		if best == nil || int64(at) > bestAt {
			best = map[string]any{"agent": agent, "status": r["status"], "at": at}
			if n, ok := r["note"]; ok {
				best["note"] = n
			}
			bestAt = int64(at)
		}
	}
	return best, bestAt
}
