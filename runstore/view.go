package runstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/lang"
)

// Space is the reading and answering face of a space's runs, what `cotal run ps`,
// `journal`, `answer` and `amend`, the dashboard and the console share: the run records,
// the journals, and the answers filed to their pauses.
type Space struct {
	JS       jetstream.JetStream
	Name     string       // the space
	Endpoint string       // "" means DefaultEndpoint
	Now      func() int64 // ms; nil means the caller must set At itself (tests inject)

	mu sync.Mutex
	// seen keeps each run's open pauses by the journal high mark they were read at: a
	// dashboard asking every few seconds replays a journal only when it grew.
	seen map[string]seenPauses
}

type seenPauses struct {
	high   int64
	pauses []Pause
}

func (s *Space) endpoint() string {
	if s.Endpoint == "" {
		return DefaultEndpoint
	}
	return s.Endpoint
}

// RunRow is one run as `cotal run ps --json` prints it: the reference's run-ps row
// (runId, endpoint, and state, holder, epoch, journalHigh when the run has a status),
// with the newer rows' startedAt and revoked.
type RunRow struct {
	RunID       string `json:"runId"`
	Endpoint    string `json:"endpoint"`
	State       string `json:"state,omitempty"`
	Holder      string `json:"holder,omitempty"`
	Epoch       *int64 `json:"epoch,omitempty"`
	JournalHigh *int64 `json:"journalHigh,omitempty"`
	ForkedFrom  *Fork  `json:"forkedFrom,omitempty"`
	StartedAt   int64  `json:"startedAt,omitempty"`
	// ProgramHash is the hash of the run's recorded program (sha256: over its canonical
	// {source}), when one is recorded.
	ProgramHash string `json:"programHash,omitempty"`
	// Revoked is the revocation marker, when the run was revoked (display only: the
	// status stays as its driver last wrote it).
	Revoked *Revocation `json:"revoked,omitempty"`
	// RevocationUnreadable says why the marker could not be read: the row's state is
	// then unknown and ps exits 1.
	RevocationUnreadable string `json:"revocationUnreadable,omitempty"`
}

// ShownState is the STATE column: revoked, unchecked (its marker unreadable), the
// status's state, or "(no status)".
func (r RunRow) ShownState() string {
	switch {
	case r.RevocationUnreadable != "":
		return "unchecked"
	case r.Revoked != nil:
		return "revoked"
	case r.State == "":
		return "(no status)"
	}
	return r.State
}

// Runs lists every run recorded in the space, the oldest first.
func (s *Space) Runs(ctx context.Context) ([]RunRow, error) {
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return nil, err
	}
	adm, admErr := OpenAdmissions(ctx, s.JS, s.Name)
	lister, err := recs.KV.ListKeysFiltered(ctx, "run.*.*.spec")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	rows := make([]RunRow, 0, len(keys))
	for _, k := range keys {
		parts := strings.Split(k, ".")
		if len(parts) != 4 || CheckID("run id", parts[2]) != nil || CheckID("endpoint", parts[1]) != nil {
			continue
		}
		r := RunRow{Endpoint: parts[1], RunID: parts[2]}
		var spec RunSpec
		if _, err := recs.Get(ctx, k, &spec); err != nil {
			continue
		}
		r.StartedAt, r.ForkedFrom = spec.Pins.StartedAt, spec.ForkedFrom
		var program Program
		if _, err := recs.Get(ctx, ProgramKey(r.Endpoint, r.RunID), &program); err == nil {
			r.ProgramHash = lang.ProgramHash(program.Source)
		}
		var st RunStatus
		if _, err := recs.Get(ctx, RunStatusKey(r.Endpoint, r.RunID), &st); err == nil {
			r.State, r.Holder, r.Epoch, r.JournalHigh = st.State, st.Holder, &st.Epoch, &st.JournalHigh
		}
		switch {
		case admErr != nil:
			r.RevocationUnreadable = admErr.Error()
		default:
			rv, err := adm.Revoked(ctx, r.Endpoint, r.RunID)
			if err != nil {
				r.RevocationUnreadable = err.Error()
			}
			r.Revoked = rv
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].StartedAt < rows[j].StartedAt })
	return rows, nil
}

// JournalRow is one journal record as `cotal run journal --json` prints it (the
// reference's run-status row): an activation, or a step with its state, outcome, and
// while it is an open pause, what it asks.
type JournalRow struct {
	N          int64  `json:"n"`
	Kind       string `json:"kind"`
	Holder     string `json:"holder,omitempty"`
	Epoch      *int64 `json:"epoch,omitempty"`
	ReplayedTo *int64 `json:"replayedTo,omitempty"`
	Step       string `json:"step,omitempty"`
	State      string `json:"state,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Asks       string `json:"asks,omitempty"`
	Addressee  string `json:"addressee,omitempty"`
}

// RunView is one run: its spec, its status (nil before its first), its journal rows, its
// open pauses and the answers filed to its checkpoints.
type RunView struct {
	RunID    string       `json:"runId"`
	Endpoint string       `json:"endpoint"`
	Spec     RunSpec      `json:"spec"`
	Status   *RunStatus   `json:"status,omitempty"`
	Journal  []JournalRow `json:"journal"`
	Pending  []Pause      `json:"pending"`
}

// Pause is a checkpoint waiting for an answer.
type Pause struct {
	RunID    string `json:"runId"`
	Step     string `json:"step"`
	Token    string `json:"token"`
	Asks     string `json:"asks,omitempty"`
	Since    int64  `json:"since,omitempty"`    // ms
	Deadline int64  `json:"deadline,omitempty"` // ms; 0 when unknown
}

// external is what a pending pause binds on its entry: the reference's asks and
// addressee, and the local driver's token, since, deadline and prompt.
type external struct {
	Token     string `json:"token"`
	Since     int64  `json:"since"`
	Deadline  int64  `json:"deadline"`
	Prompt    string `json:"prompt"`
	Asks      string `json:"asks"`
	Addressee string `json:"addressee"`
}

func externalOf(e Entry) external {
	var x external
	if len(e.External) > 0 {
		_ = json.Unmarshal(e.External, &x) // an external this reader does not know shows nothing
	}
	if x.Asks == "" {
		x.Asks = x.Prompt
	}
	return x
}

// PauseToken is the token that answers a pause entry: the one it bound, else its request id.
func PauseToken(e Entry) string {
	if x := externalOf(e); x.Token != "" {
		return x.Token
	}
	return e.RequestID
}

// Outcome is an entry's outcome as the journal shows it: pending, a checkpoint's resolved
// or expired, else its status with the error code when there is one.
func Outcome(e Entry) string {
	if e.State == "pending" {
		return "pending"
	}
	var r struct {
		Outcome string `json:"outcome"`
	}
	if json.Unmarshal(e.Result, &r) == nil && (r.Outcome == "resolved" || r.Outcome == "expired") {
		return r.Outcome
	}
	if e.Error != nil && e.Error.Code != "" {
		return e.Status + " (" + e.Error.Code + ")"
	}
	return e.Status
}

// JournalRows renders a replayed journal as rows.
func JournalRows(recs []Record) []JournalRow {
	rows := make([]JournalRow, 0, len(recs))
	for _, r := range recs {
		if a := r.Activation; a != nil {
			rt := int64(a.ReplayedTo)
			rows = append(rows, JournalRow{N: a.N, Kind: KindActivation, Holder: a.Holder, Epoch: &a.Epoch, ReplayedTo: &rt})
			continue
		}
		e := r.Entry
		row := JournalRow{N: r.Step.N, Kind: KindStep, Step: e.Key(), State: e.State, Outcome: Outcome(*e)}
		if e.State == "pending" {
			x := externalOf(*e)
			row.Asks, row.Addressee = x.Asks, x.Addressee
		}
		rows = append(rows, row)
	}
	return rows
}

// Folded answers each step key's last entry, in the order the keys first appeared.
func Folded(recs []Record) []Entry {
	idx := map[string]int{}
	var out []Entry
	for _, r := range recs {
		if r.Entry == nil {
			continue
		}
		k := r.Entry.Key()
		if i, ok := idx[k]; ok {
			out[i] = *r.Entry
			continue
		}
		idx[k] = len(out)
		out = append(out, *r.Entry)
	}
	return out
}

// OpenPauses lists a journal's checkpoints that wait for an answer.
func OpenPauses(run string, recs []Record) []Pause {
	var out []Pause
	for _, e := range Folded(recs) {
		if e.Kind != "checkpoint" || e.State != "pending" {
			continue
		}
		x := externalOf(e)
		since := x.Since
		if since == 0 {
			since = e.StartedAt
		}
		out = append(out, Pause{RunID: run, Step: e.Key(), Token: PauseToken(e), Asks: x.Asks, Since: since, Deadline: x.Deadline})
	}
	return out
}

// View reads one run; ErrNoRecord when the space has no record of it.
func (s *Space) View(ctx context.Context, run string) (RunView, error) {
	if err := CheckID("run id", run); err != nil {
		return RunView{}, err
	}
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return RunView{}, err
	}
	v := RunView{RunID: run, Endpoint: s.endpoint()}
	if _, err := recs.Get(ctx, RunSpecKey(v.Endpoint, run), &v.Spec); err != nil {
		return RunView{}, err
	}
	var st RunStatus
	if _, err := recs.Get(ctx, RunStatusKey(v.Endpoint, run), &st); err == nil {
		v.Status = &st
	} else if !errors.Is(err, ErrNoRecord) {
		return RunView{}, err
	}
	journal, _, err := Replay(ctx, s.JS, s.Name, run)
	if err != nil {
		return RunView{}, err
	}
	v.Journal, v.Pending = JournalRows(journal), OpenPauses(run, journal)
	if v.Pending == nil {
		v.Pending = []Pause{}
	}
	return v, nil
}

// Pending lists every open checkpoint of the space's running runs, the oldest first.
func (s *Space) Pending(ctx context.Context) ([]Pause, error) {
	rows, err := s.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var out []Pause
	live := map[string]bool{}
	for _, r := range rows {
		if r.State != StateRunning && r.State != StateReleased || r.JournalHigh == nil {
			continue
		}
		live[r.RunID] = true
		s.mu.Lock()
		got, ok := s.seen[r.RunID]
		s.mu.Unlock()
		if !ok || got.high != *r.JournalHigh {
			journal, _, err := Replay(ctx, s.JS, s.Name, r.RunID)
			if err != nil {
				return nil, err
			}
			got = seenPauses{high: int64(len(journal)) - 1, pauses: OpenPauses(r.RunID, journal)}
			s.mu.Lock()
			if s.seen == nil {
				s.seen = map[string]seenPauses{}
			}
			s.seen[r.RunID] = got
			s.mu.Unlock()
		}
		out = append(out, got.pauses...)
	}
	s.mu.Lock()
	for id := range s.seen {
		if !live[id] {
			delete(s.seen, id)
		}
	}
	s.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Since < out[j].Since })
	return out, nil
}

// Refusals of an answer or an amendment; each leaves everything as it was.
var (
	ErrNotReached    = errors.New("the run has not reached that step")
	ErrNotCheckpoint = errors.New("the step is not a checkpoint")
	ErrSettled       = errors.New("the step is settled already")
	ErrAnswered      = errors.New("the step was answered already")
	ErrNotSettled    = errors.New("the step is not settled with an accepted answer")
	ErrNoJournal     = errors.New("the run's journal is empty or it does not exist")
	ErrBadAnswer     = errors.New("the answer is not a JSON value or an artifact reference")
)

// MaxAnswerValue bounds an answer's value (bytes of JSON).
const MaxAnswerValue = 64 << 10

// MaxBy bounds who answers.
const MaxBy = 128

// MaxArtifact bounds an answer's artifact reference.
const MaxArtifact = 1024

// AnswerRequest is one answer or amendment: the run, the step key, who answers, and what:
// a value (JSON), an artifact (the reference's digest of what the answerer saw, such as
// sha256:<hex>), or both. One of the two is needed.
type AnswerRequest struct {
	Run      string
	Step     string
	Value    json.RawMessage // nil: the answer carries no value
	Artifact string          // "": none
	By       string
}

func (q AnswerRequest) check() (any, error) {
	if err := CheckID("run id", q.Run); err != nil {
		return nil, err
	}
	if q.By == "" || len(q.By) > MaxBy || strings.ContainsFunc(q.By, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("who answers: want 1 to %d bytes of printable text", MaxBy)
	}
	if len(q.Artifact) > MaxArtifact || strings.ContainsFunc(q.Artifact, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: an artifact reference is at most %d bytes of printable text", ErrBadAnswer, MaxArtifact)
	}
	if len(q.Value) == 0 {
		if q.Artifact == "" {
			return nil, fmt.Errorf("%w: give a value, an artifact, or both", ErrBadAnswer)
		}
		return nil, nil
	}
	if len(q.Value) > MaxAnswerValue || !json.Valid(q.Value) {
		return nil, fmt.Errorf("%w (at most %d bytes; a bare string needs its quotes: \"yes\")", ErrBadAnswer, MaxAnswerValue)
	}
	var v any
	if err := json.Unmarshal(q.Value, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	return v, nil
}

// step finds a step's folded entry in the run's journal.
func (s *Space) step(ctx context.Context, run, step string) (Entry, error) {
	journal, _, err := Replay(ctx, s.JS, s.Name, run)
	if err != nil {
		return Entry{}, err
	}
	if len(journal) == 0 {
		return Entry{}, fmt.Errorf("run %s: %w", run, ErrNoJournal)
	}
	for _, e := range Folded(journal) {
		if e.Key() != step {
			continue
		}
		if e.Kind != "checkpoint" {
			return e, fmt.Errorf("step %s is a %s: %w", step, e.Kind, ErrNotCheckpoint)
		}
		return e, nil
	}
	return Entry{}, fmt.Errorf("run %s, step %s: %w", run, step, ErrNotReached)
}

func (s *Space) now() int64 {
	if s.Now != nil {
		return s.Now()
	}
	return 0
}

// Filed is an answer filed to a pause, and how it settles: "filed" (the run's driver reads
// the answer record and settles the step), or "resumed" (the checkpoint was minted on the
// checkpoint plane, and the answer resumed it there: its status and its settle fact).
type Filed struct {
	Answer
	Settle string
}

// Answer files the answer to a run's pending checkpoint: a create-only answer record
// under the pause's token, whose id derives from what it says. The run's driver (now, or
// the next to resume it) settles the step with the first answer. A checkpoint a driver
// minted on the checkpoint plane (cp.<endpoint>.<token>, as the reference's driver does)
// is then resumed there as its holder: the status CAS to resumed and the one-use settle
// fact, which is what that driver waits on. A step not reached, not a checkpoint,
// settled (or past its deadline), or answered already is refused, and nothing is written.
func (s *Space) Answer(ctx context.Context, q AnswerRequest) (Filed, error) {
	value, err := q.check()
	if err != nil {
		return Filed{}, err
	}
	e, err := s.step(ctx, q.Run, q.Step)
	if err != nil {
		return Filed{}, err
	}
	if e.State != "pending" {
		return Filed{}, fmt.Errorf("step %s: %w", q.Step, ErrSettled)
	}
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return Filed{}, err
	}
	token := PauseToken(e)
	plane, err := readPlane(ctx, recs, s.endpoint(), token)
	if err != nil {
		return Filed{}, err
	}
	now := s.now()
	if plane != nil {
		if err := plane.open(now); err != nil {
			return Filed{}, fmt.Errorf("step %s: %w", q.Step, err)
		}
	}
	prior, err := recs.Answers(ctx, s.endpoint(), token)
	if err != nil {
		return Filed{}, err
	}
	for _, a := range prior {
		if a.Supersedes == "" {
			return Filed{Answer: a}, fmt.Errorf("step %s: by %s (answer %s), and the run acts on the first answer: %w", q.Step, a.By, a.AnswerID, ErrAnswered)
		}
	}
	id, err := AnswerID(token, q.By, value, q.Artifact)
	if err != nil {
		return Filed{}, err
	}
	a := Answer{V: 1, Token: token, AnswerID: id, Value: q.Value, Artifact: q.Artifact, By: q.By, At: now}
	if err := recs.Create(ctx, AnswerKey(s.endpoint(), token, id), a); err != nil {
		if errors.Is(err, ErrConflict) {
			return Filed{}, fmt.Errorf("step %s: %w", q.Step, ErrAnswered)
		}
		return Filed{}, err
	}
	if plane == nil {
		return Filed{Answer: a, Settle: "filed"}, nil
	}
	if err := s.present(ctx, recs, plane, id, now); err != nil {
		return Filed{Answer: a}, fmt.Errorf("step %s: the answer is filed, but: %w", q.Step, err)
	}
	return Filed{Answer: a, Settle: CheckpointResumed}, nil
}

// Amend files an amendment beside a settled checkpoint's accepted answer: a new answer
// record with a fresh random id that supersedes the accepted one. The run keeps the
// answer it acted on; the amendment is for whoever reads the journal after.
func (s *Space) Amend(ctx context.Context, q AnswerRequest) (Answer, error) {
	if _, err := q.check(); err != nil {
		return Answer{}, err
	}
	e, err := s.step(ctx, q.Run, q.Step)
	if err != nil {
		return Answer{}, err
	}
	var res struct {
		Outcome  string `json:"outcome"`
		AnswerID string `json:"answerId"`
	}
	if e.State != "settled" || json.Unmarshal(e.Result, &res) != nil || res.Outcome != "resolved" {
		return Answer{}, fmt.Errorf("step %s: %w", q.Step, ErrNotSettled)
	}
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return Answer{}, err
	}
	token := PauseToken(e)
	accepted, err := s.accepted(ctx, recs, token, res.AnswerID)
	if err != nil {
		return Answer{}, err
	}
	if accepted == "" {
		return Answer{}, fmt.Errorf("step %s: no accepted answer is recorded: %w", q.Step, ErrNotSettled)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	id := base64.RawURLEncoding.EncodeToString(raw[:])[:43]
	a := Answer{V: 1, Token: token, AnswerID: id, Value: q.Value, Artifact: q.Artifact, By: q.By, At: s.now(), Supersedes: accepted}
	if err := recs.Create(ctx, AnswerKey(s.endpoint(), token, id), a); err != nil {
		return Answer{}, err
	}
	return a, nil
}

// accepted names the answer a settled checkpoint acted on: the one its settled result
// names, else the one its checkpoint-plane status names, else the first answer filed.
func (s *Space) accepted(ctx context.Context, recs *Records, token, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	plane, err := readPlane(ctx, recs, s.endpoint(), token)
	if err != nil {
		return "", err
	}
	if plane != nil && plane.status.SettledAnswerID != "" {
		return plane.status.SettledAnswerID, nil
	}
	all, err := recs.Answers(ctx, s.endpoint(), token)
	if err != nil {
		return "", err
	}
	for _, a := range all {
		if a.Supersedes == "" {
			return a.AnswerID, nil
		}
	}
	return "", nil
}

// Answers lists the answers filed to a step of a run (the accepted one and amendments),
// in store order.
func (s *Space) Answers(ctx context.Context, run, step string) ([]Answer, error) {
	e, err := s.step(ctx, run, step)
	if err != nil {
		return nil, err
	}
	recs, err := OpenRecords(ctx, s.JS, s.Name)
	if err != nil {
		return nil, err
	}
	return recs.Answers(ctx, s.endpoint(), PauseToken(e))
}
