package runstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// Record kinds on the journal.
const (
	KindActivation = "activation"
	KindStep       = "step"
)

// Activation is the record a driver appends when it takes a run over: who it is, the
// fencing token and epoch it holds the run under, and the stream sequence it replayed to.
type Activation struct {
	V            int    `json:"v"`
	Kind         string `json:"kind"`
	Run          string `json:"run"`
	N            int64  `json:"n"`
	Holder       string `json:"holder"`
	FencingToken int64  `json:"fencingToken"`
	Epoch        int64  `json:"epoch"`
	ReplayedTo   uint64 `json:"replayedTo"`
	At           int64  `json:"at"`
}

// Step wraps one journal entry; Entry is the language's record, carried verbatim.
type Step struct {
	V     int             `json:"v"`
	Kind  string          `json:"kind"`
	Run   string          `json:"run"`
	N     int64           `json:"n"`
	At    int64           `json:"at"`
	Entry json.RawMessage `json:"entry"`
}

// EntryError is a failed step's error.
type EntryError struct {
	Code    string          `json:"code"`
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Stack   string          `json:"stack,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// Entry is one step journal entry (the language's JournalEntry), its fields in the order
// the reference writes them. Readers ignore fields they do not know.
type Entry struct {
	V            int             `json:"v"`
	Seq          int64           `json:"seq"` // the entry's ordinal among the run's step keys
	Run          string          `json:"run"`
	Scope        string          `json:"scope"`
	Kind         string          `json:"kind"`
	Name         string          `json:"name"`
	Occurrence   int             `json:"occurrence"`
	InputHash    string          `json:"inputHash"`
	RequestID    string          `json:"requestId,omitempty"`
	Attempt      *int            `json:"attempt,omitempty"`
	State        string          `json:"state"` // pending | settled
	StartedAt    int64           `json:"startedAt"`
	External     json.RawMessage `json:"external,omitempty"`
	Status       string          `json:"status,omitempty"` // ok | failed | cancelled | refused
	EndedAt      *int64          `json:"endedAt,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Error        *EntryError     `json:"error,omitempty"`
	Observations json.RawMessage `json:"observations,omitempty"`
	Cancel       json.RawMessage `json:"cancel,omitempty"`
	BranchDigest string          `json:"branchDigest,omitempty"`
	Branches     json.RawMessage `json:"branches,omitempty"`
	Closed       json.RawMessage `json:"closed,omitempty"`
	Hold         json.RawMessage `json:"hold,omitempty"`
}

// Key is the entry's step key: scope + "/" + kind[":" + name] + "#" + occurrence.
func (e Entry) Key() string {
	id := e.Kind
	if e.Name != "" {
		id += ":" + e.Name
	}
	return e.Scope + "/" + id + "#" + strconv.Itoa(e.Occurrence)
}

// Record is one journal record as read back: exactly one of Activation and Step is set,
// with the entry decoded, and Seq is the stream sequence it landed at.
type Record struct {
	Seq        uint64
	Activation *Activation
	Step       *Step
	Entry      *Entry
}

// N is the record's journal ordinal.
func (r Record) N() int64 {
	if r.Activation != nil {
		return r.Activation.N
	}
	return r.Step.N
}

// ParseRecord decodes one journal message. The envelope is closed, as the reference's
// reader has it; the entry's unknown fields are ignored.
func ParseRecord(data []byte) (Record, error) {
	var head struct {
		V    int    `json:"v"`
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Record{}, fmt.Errorf("journal record: %w", err)
	}
	if head.V != 1 {
		return Record{}, fmt.Errorf("journal record: version %d, want 1", head.V)
	}
	switch head.Kind {
	case KindActivation:
		var a Activation
		if err := strictjson.Decode(data, &a); err != nil {
			return Record{}, fmt.Errorf("journal activation: %w", err)
		}
		if a.Run == "" || a.Holder == "" || a.FencingToken < 1 || a.N < 0 {
			return Record{}, fmt.Errorf("journal activation: want a run, a holder, a fencing token >= 1 and an ordinal >= 0")
		}
		return Record{Activation: &a}, nil
	case KindStep:
		var s Step
		if err := strictjson.Decode(data, &s); err != nil {
			return Record{}, fmt.Errorf("journal step: %w", err)
		}
		if s.Run == "" || s.N < 0 || len(s.Entry) == 0 {
			return Record{}, fmt.Errorf("journal step: want a run, an ordinal >= 0 and an entry")
		}
		var e Entry
		if err := json.Unmarshal(s.Entry, &e); err != nil {
			return Record{}, fmt.Errorf("journal step %d: entry: %w", s.N, err)
		}
		return Record{Step: &s, Entry: &e}, nil
	}
	return Record{}, fmt.Errorf("journal record: unknown kind %q", head.Kind)
}

// Errors of the activation barrier and the appender; each names the reference's.
var (
	// ErrSuperseded: the stream refused an append's expected last sequence: another
	// driver activated, or the run was retired. The appender is finished (RunSuperseded).
	ErrSuperseded = errors.New("run superseded: the journal refused this driver's append")
	// ErrStalled: an append ended with no PubAck; whether it landed is unknown, so the
	// appender is finished (RunJournalStalled).
	ErrStalled = errors.New("run journal stalled")
	// ErrActivationRaced: the activation lost its CAS three times (ActivationRaced).
	ErrActivationRaced = errors.New("activation raced")
	// ErrStaleLease: a takeover under a fencing token lower than the journal's (StaleLeaseToken).
	ErrStaleLease = errors.New("stale lease token")
	// ErrNotAuthorized: the journal's token offered by another holder or epoch (ActivationNotAuthorized).
	ErrNotAuthorized = errors.New("activation not authorized")
	// ErrAlreadyStarted: a new run whose journal holds records (RunAlreadyStarted).
	ErrAlreadyStarted = errors.New("run already started")
	// ErrNotResumable: a resumed run whose journal is empty (RunNotResumable).
	ErrNotResumable = errors.New("run not resumable")
	// ErrTruncated: records are missing from the journal (RunJournalPrefixTruncated).
	ErrTruncated = errors.New("run journal truncated")
	// ErrReplayRaced: another driver is replaying the run (RunJournalReplayRaced).
	ErrReplayRaced = errors.New("run journal replay raced")
)

// replayFetchWait bounds the replay's fetch, as the reference's 15 s expiry does.
const replayFetchWait = 15 * time.Second

// NewTakeoverID mints the 16 hex digits that name one replay's consumer.
func NewTakeoverID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Replay reads a run's whole journal from the top through a consumer of its own
// (wfj_<run>_<takeover>, deleted after), checks the ordinal chain and the genesis record,
// and answers the records and the last stream sequence delivered (0 when none).
func Replay(ctx context.Context, js jetstream.JetStream, space, run string) ([]Record, uint64, error) {
	if err := CheckID("run id", run); err != nil {
		return nil, 0, err
	}
	stream, subject := JournalStream(space), JournalSubject(space, run)
	name := ReplayDurable(run, NewTakeoverID())
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: name, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 60 * time.Second, MaxAckPending: 1000,
		InactiveThreshold: 300 * time.Second,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("replay run %s: consumer %s: %w", run, name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, name) // inactive_threshold reaps it if this fails
	}()
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("replay run %s: %w", run, err)
	}
	if info.Delivered.Consumer != 0 || info.NumAckPending != 0 {
		return nil, 0, fmt.Errorf("replay run %s: consumer %s delivered %d already: %w", run, name, info.Delivered.Consumer, ErrReplayRaced)
	}
	want := int(info.NumPending)
	recs := make([]Record, 0, want)
	var last uint64
	for len(recs) < want {
		batch, err := cons.Fetch(want-len(recs), jetstream.FetchMaxWait(replayFetchWait))
		if err != nil {
			return nil, 0, fmt.Errorf("replay run %s: %w", run, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, fmt.Errorf("replay run %s: %w", run, err)
			}
			r, err := ParseRecord(m.Data())
			if err != nil {
				return nil, 0, fmt.Errorf("replay run %s: stream sequence %d: %w", run, md.Sequence.Stream, err)
			}
			r.Seq, last = md.Sequence.Stream, md.Sequence.Stream
			if n := r.N(); n != int64(len(recs)) {
				return nil, 0, fmt.Errorf("replay run %s: stream sequence %d holds record %d where %d was expected: %w", run, r.Seq, n, len(recs), ErrTruncated)
			}
			recs = append(recs, r)
			// Acked as read: the consumer holds at most 1000 unacknowledged records, so a
			// longer journal is delivered only as the earlier ones are acked.
			if err := m.Ack(); err != nil {
				return nil, 0, fmt.Errorf("replay run %s: ack sequence %d: %w", run, r.Seq, err)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, 0, fmt.Errorf("replay run %s: %w", run, err)
		}
		if got == 0 {
			return nil, 0, fmt.Errorf("replay run %s: delivered %d of %d records: %w", run, len(recs), want, ErrTruncated)
		}
	}
	if len(recs) > 0 && (recs[0].Activation == nil || recs[0].Activation.ReplayedTo != 0) {
		return nil, 0, fmt.Errorf("replay run %s: the first record is not an activation that replayed nothing: %w", run, ErrTruncated)
	}
	return recs, last, nil
}

// Lease is who drives a run and under what: the holder, its fencing token (only ever
// increasing for one run) and its process epoch.
type Lease struct {
	Holder       string
	FencingToken int64
	Epoch        int64
}

// LastActivation is the last activation of a replayed prefix, or nil.
func LastActivation(recs []Record) *Activation {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Activation != nil {
			return recs[i].Activation
		}
	}
	return nil
}

// Activate replays a run and appends this driver's activation behind what it replayed,
// fenced on the run subject's last sequence; a lost race replays again, three rounds at
// most. isNew says the run must have an empty journal (a start), else a non-empty one (a
// resume). The lease must not be older than the journal's last activation. It answers
// the replayed prefix (without the new activation) and the appender behind it.
func Activate(ctx context.Context, js jetstream.JetStream, space, run string, lease Lease, isNew bool, now func() int64) ([]Record, *Appender, error) {
	if lease.Holder == "" || lease.FencingToken < 1 {
		return nil, nil, fmt.Errorf("activate run %s: want a holder and a fencing token >= 1", run)
	}
	subject := JournalSubject(space, run)
	for round := 1; ; round++ {
		recs, last, err := Replay(ctx, js, space, run)
		if err != nil {
			return nil, nil, fmt.Errorf("activate run %s: %w", run, err)
		}
		if isNew && len(recs) > 0 {
			return nil, nil, fmt.Errorf("activate run %s: its journal holds %d records: %w", run, len(recs), ErrAlreadyStarted)
		}
		if !isNew && len(recs) == 0 {
			return nil, nil, fmt.Errorf("activate run %s: %s holds no records: %w", run, subject, ErrNotResumable)
		}
		if a := LastActivation(recs); a != nil {
			switch {
			case lease.FencingToken < a.FencingToken:
				return nil, nil, fmt.Errorf("activate run %s: held under fencing token %d by %s, offered %d: %w", run, a.FencingToken, a.Holder, lease.FencingToken, ErrStaleLease)
			case lease.FencingToken == a.FencingToken && (lease.Holder != a.Holder || lease.Epoch != a.Epoch):
				return nil, nil, fmt.Errorf("activate run %s: fencing token %d is held by %s epoch %d: %w", run, a.FencingToken, a.Holder, a.Epoch, ErrNotAuthorized)
			}
		}
		act := Activation{V: 1, Kind: KindActivation, Run: run, N: int64(len(recs)), Holder: lease.Holder,
			FencingToken: lease.FencingToken, Epoch: lease.Epoch, ReplayedTo: last, At: now()}
		ack, err := publishFenced(ctx, js, subject, act, last)
		if casLoss(err) {
			if round >= 3 {
				return nil, nil, fmt.Errorf("activate run %s at sequence %d after %d rounds: %w", run, last, round, ErrActivationRaced)
			}
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("activate run %s: %w", run, err)
		}
		return recs, &Appender{js: js, run: run, subject: subject, head: ack.Sequence, next: act.N + 1}, nil
	}
}

func publishFenced(ctx context.Context, js jetstream.JetStream, subject string, v any, expect uint64) (*jetstream.PubAck, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{}}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	return js.PublishMsg(ctx, msg)
}

// Appender appends a run's step records behind its activation, one at a time, each
// fenced on the head the last one left. A refusal or a lost PubAck finishes it: every
// later append answers the same error and nothing more reaches the wire.
type Appender struct {
	js      jetstream.JetStream
	run     string
	subject string

	mu     sync.Mutex
	head   uint64
	next   int64
	poison error
}

// Append writes one entry as the next step record and answers its journal ordinal.
func (a *Appender) Append(ctx context.Context, e Entry) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.poison != nil {
		return 0, a.poison
	}
	b, err := marshal(e)
	if err != nil {
		return 0, fmt.Errorf("run %s: entry %s: %w", a.run, e.Key(), err)
	}
	at := e.StartedAt
	if e.EndedAt != nil {
		at = *e.EndedAt
	}
	st := Step{V: 1, Kind: KindStep, Run: a.run, N: a.next, At: at, Entry: b}
	ack, err := publishFenced(ctx, a.js, a.subject, st, a.head)
	if casLoss(err) {
		a.poison = fmt.Errorf("run %s: append expecting sequence %d on %s: %w", a.run, a.head, a.subject, ErrSuperseded)
		return 0, a.poison
	}
	if err != nil {
		a.poison = fmt.Errorf("run %s: append expecting sequence %d: %w: %v", a.run, a.head, ErrStalled, err)
		return 0, a.poison
	}
	a.head = ack.Sequence
	a.next++
	return st.N, nil
}

// High is the ordinal of the last record this appender saw land (its activation's at first).
func (a *Appender) High() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.next - 1
}
