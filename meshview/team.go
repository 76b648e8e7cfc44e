package meshview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/taskboard"
)

// Task is one task of the space's board as the views show it: the fold of its rows
// (taskboard.Fold) without its body. Times are unix ms; every string but the ids and
// the status is what a peer wrote.
type Task struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Status     string `json:"status"`
	Role       string `json:"role,omitempty"`
	Assignee   string `json:"assignee,omitempty"`
	Creator    string `json:"creator"`
	Holder     string `json:"holder,omitempty"`
	Note       string `json:"note,omitempty"`
	Created    int64  `json:"created"`
	Updated    int64  `json:"updated"`
	LeaseUntil int64  `json:"leaseUntil,omitempty"` // while held and unfinished: when the claim lapses
	Lapsed     string `json:"lapsed,omitempty"`     // the last holder whose claim lapsed
}

// TaskOf is the view of a folded task.
func TaskOf(t taskboard.Task) Task {
	v := Task{ID: t.ID, Title: t.Title, Status: t.Status, Role: t.Role, Assignee: t.Assignee, Creator: t.Creator,
		Holder: t.Holder, Note: t.Note, Created: t.Created.UnixMilli(), Updated: t.Updated.UnixMilli(), Lapsed: t.Lapsed}
	if !t.LeaseUntil.IsZero() {
		v.LeaseUntil = t.LeaseUntil.UnixMilli()
	}
	return v
}

// Claim is one live file claim as the views show it. Times are unix ms; Name and Reason
// are what the holder wrote.
type Claim struct {
	Path      string `json:"path"`
	Holder    string `json:"holder"`
	Name      string `json:"name,omitempty"`
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason,omitempty"`
	Since     int64  `json:"since"`
	Renewed   int64  `json:"renewed"`
	Expires   int64  `json:"expires"`
}

// ClaimOf is the view of a live claim.
func ClaimOf(c claims.Claim) Claim {
	return Claim{Path: c.Path, Holder: c.Holder, Name: c.Name, Exclusive: c.Exclusive, Reason: c.Reason,
		Since: c.Since, Renewed: c.Renewed, Expires: c.ExpiresAt().UnixMilli()}
}

func claimKey(c Claim) string { return c.Holder + "\x00" + c.Path }

// teamState is the model's share of the task board and the file claims.
type teamState struct {
	tasks        []Task // creation order
	claims       []Claim
	tasksSeeded  bool
	claimsSeeded bool
}

// SetTasks replaces the board the model shows with tasks (in creation order). Each task
// added or changed makes an EventTask, each one gone an EventTask with Gone set; the
// first call seeds the model without events (a view reads Tasks when it starts).
func (m *Model) SetTasks(tasks []Task) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := make(map[string]Task, len(m.team.tasks))
	for _, t := range m.team.tasks {
		old[t.ID] = t
	}
	seeded := m.team.tasksSeeded
	m.team.tasks, m.team.tasksSeeded = slices.Clone(tasks), true
	if !seeded {
		return nil
	}
	var evs []Event
	for _, t := range tasks {
		if prev, ok := old[t.ID]; !ok || prev != t {
			cp := t
			evs = append(evs, m.emit(Event{Type: EventTask, Task: &cp}))
		}
		delete(old, t.ID)
	}
	for _, t := range sortedByKey(old) {
		evs = append(evs, m.emit(Event{Type: EventTask, Task: &Task{ID: t.ID}, Gone: true}))
	}
	return evs
}

// SetClaims replaces the live claims the model shows (sorted by path, then holder), as
// SetTasks does: an EventClaim per claim added or changed, one with Gone per claim
// released or expired; the first call seeds without events.
func (m *Model) SetClaims(cs []Claim) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := make(map[string]Claim, len(m.team.claims))
	for _, c := range m.team.claims {
		old[claimKey(c)] = c
	}
	seeded := m.team.claimsSeeded
	m.team.claims, m.team.claimsSeeded = slices.Clone(cs), true
	if !seeded {
		return nil
	}
	var evs []Event
	for _, c := range cs {
		if prev, ok := old[claimKey(c)]; !ok || prev != c {
			cp := c
			evs = append(evs, m.emit(Event{Type: EventClaim, Claim: &cp}))
		}
		delete(old, claimKey(c))
	}
	for _, c := range sortedByKey(old) {
		evs = append(evs, m.emit(Event{Type: EventClaim, Claim: &Claim{Path: c.Path, Holder: c.Holder}, Gone: true}))
	}
	return evs
}

// sortedByKey lists a map's values in key order, so removals emit in a stable order.
func sortedByKey[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// Tasks lists the board's tasks in creation order; empty, never nil.
func (m *Model) Tasks() []Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Task{}, m.team.tasks...)
}

// Claims lists the live file claims by path, then holder; empty, never nil.
func (m *Model) Claims() []Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Claim{}, m.team.claims...)
}

// DefaultTeamEvery is how often a TeamWatcher without a live grant reads both buckets.
const DefaultTeamEvery = 2 * time.Second

// TeamWatcher feeds a Model's tasks and claims from a space's task board and file
// claims buckets. It watches both live by a plain subscription to the subjects their
// writes are published on (granted to the views' credentials) and reads a bucket afresh
// when it changed, by batch Direct Get; without the grant it reads both every Every. It
// also reads again when the earliest task lease or claim runs out, so a lapse shows
// without a write. Set fields before Run.
type TeamWatcher struct {
	Conn  *nats.Conn // the observer's connection; Run does not close it
	Space string
	Model *Model
	Now   func() time.Time // the clock leases and expiries are judged by; nil is time.Now
	Lease time.Duration    // the board's lease; 0 is taskboard.Lease
	Every time.Duration    // the read interval without a live grant; 0 is DefaultTeamEvery
	// Logger is where read failures go; nil means discard.
	Logger *slog.Logger

	mu       sync.Mutex
	tasksErr error
	claimErr error
}

// Err is why the last read of the board or the claims failed (a space made before they
// existed gains their buckets at the next `cotal up`), or nil.
func (w *TeamWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.tasksErr, w.claimErr)
}

func (w *TeamWatcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Run reads both buckets, calls ready, and follows them until ctx ends; it returns nil
// then. A failed read is kept in Err and retried at the next change or interval; only a
// subscription the connection cannot make ends Run with an error.
func (w *TeamWatcher) Run(ctx context.Context, ready func()) error {
	if w.Conn == nil || w.Model == nil || w.Space == "" {
		return errors.New("meshview: a team watcher needs a Conn, a Space and a Model")
	}
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(w.Conn)
	if err != nil {
		return fmt.Errorf("meshview %s: team: %w", w.Space, err)
	}
	tasks, cls := newWatchedBucket(taskboard.Bucket(w.Space)), newWatchedBucket(claims.Bucket(w.Space))
	live := true
	for _, b := range []*watchedBucket{tasks, cls} {
		subject := "$KV." + b.name + ".>"
		sub, err := w.Conn.Subscribe(subject, b.seen)
		if err != nil {
			return fmt.Errorf("meshview %s: subscribe %s: %w", w.Space, subject, err)
		}
		defer func() { _ = sub.Unsubscribe() }() // the watch is over; nothing to report to
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	err = w.Conn.FlushWithContext(fctx)
	fcancel()
	if err != nil {
		return fmt.Errorf("meshview %s: team: %w", w.Space, err)
	}
	if err := w.Conn.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "$KV.") {
		live = false // an operator's credential without the grant: read on an interval
		log.Info("task board and claims read every interval: no live grant", "err", err)
	}
	w.readTasks(ctx, tasks, log)
	w.readClaims(ctx, cls, js, log)
	// A failed first read still seeds the model (empty), so what a later read finds (a
	// bucket the next `cotal up` added) arrives as events.
	w.Model.SetTasks(w.Model.Tasks())
	w.Model.SetClaims(w.Model.Claims())
	if ready != nil {
		ready()
	}
	var tick <-chan time.Time
	if !live {
		every := w.Every
		if every <= 0 {
			every = DefaultTeamEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	lapse := time.NewTimer(w.untilLapse())
	defer lapse.Stop()
	// A write reaches this subscription and the bucket's stream side by side, so the read
	// it triggers may not show it yet: a bucket whose read misses a write seen live is
	// read again, sooner first, until it shows it (or for about ten seconds).
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := time.Duration(0)
	again := func(missing bool) {
		if !missing {
			return
		}
		backoff = min(max(2*backoff, 20*time.Millisecond), time.Second)
		retry.Reset(backoff)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tasks.kick:
			again(w.readTasks(ctx, tasks, log))
		case <-cls.kick:
			again(w.readClaims(ctx, cls, js, log))
		case <-retry.C:
			missing := w.readTasks(ctx, tasks, log)
			missing = w.readClaims(ctx, cls, js, log) || missing
			if backoff >= time.Second {
				gaveUpTasks, gaveUpClaims := tasks.giveUp(), cls.giveUp()
				if gaveUpTasks && gaveUpClaims {
					missing = false // no read shows it: a write the broker did not keep
				}
			}
			if !missing {
				backoff = 0
			}
			again(missing)
		case <-tick:
			w.readTasks(ctx, tasks, log)
			w.readClaims(ctx, cls, js, log)
		case <-lapse.C:
			w.readTasks(ctx, tasks, log)
			w.readClaims(ctx, cls, js, log)
		}
		lapse.Reset(w.untilLapse())
	}
}

// watchedBucket is one bucket a TeamWatcher follows: kick says a write was seen live,
// and pending holds the writes seen live that no read has shown yet.
type watchedBucket struct {
	name string
	kick chan struct{}

	mu      sync.Mutex
	pending map[string]pendingWrite // by key
}

// pendingWrite is a write seen live: the value put, or a delete; tries counts the reads
// since that missed it.
type pendingWrite struct {
	value   []byte
	deleted bool
	tries   int
}

func newWatchedBucket(name string) *watchedBucket {
	return &watchedBucket{name: name, kick: make(chan struct{}, 1), pending: map[string]pendingWrite{}}
}

// seen records a write published on the bucket's subjects and asks for a read.
func (b *watchedBucket) seen(m *nats.Msg) {
	key, ok := strings.CutPrefix(m.Subject, "$KV."+b.name+".")
	if !ok {
		return
	}
	op := m.Header.Get("KV-Operation")
	b.mu.Lock()
	b.pending[key] = pendingWrite{value: m.Data, deleted: op == "DEL" || op == "PURGE"}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // a read is already due; it sees this write too
	}
}

// shown drops the pending writes recs (a whole read of the bucket) show, and reports
// whether any is still missing.
func (b *watchedBucket) shown(recs []client.KVRecord) (missing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return false
	}
	latest := make(map[string]client.KVRecord, len(recs))
	for _, r := range recs {
		latest[r.Key] = r
	}
	for k, p := range b.pending {
		r, ok := latest[k]
		put := ok && r.Op == jetstream.KeyValuePut
		if p.deleted && !put || !p.deleted && put && bytes.Equal(r.Value, p.value) {
			delete(b.pending, k)
			continue
		}
		p.tries++
		b.pending[k] = p
	}
	return len(b.pending) > 0
}

// giveUp forgets the writes that many reads missed, and reports whether none is left.
func (b *watchedBucket) giveUp() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.pending {
		if p.tries >= 12 {
			delete(b.pending, k)
		}
	}
	return len(b.pending) == 0
}

// untilLapse is how long until the earliest lease or claim the model shows runs out,
// at least a tenth of a second (a clock that stands still re-reads no faster), at most a
// minute.
func (w *TeamWatcher) untilLapse() time.Duration {
	next := int64(0)
	for _, t := range w.Model.Tasks() {
		if t.LeaseUntil > 0 && (next == 0 || t.LeaseUntil < next) {
			next = t.LeaseUntil
		}
	}
	for _, c := range w.Model.Claims() {
		if next == 0 || c.Expires < next {
			next = c.Expires
		}
	}
	if next == 0 {
		return time.Minute
	}
	d := time.UnixMilli(next).Sub(w.now()) + 10*time.Millisecond
	return min(max(d, 100*time.Millisecond), time.Minute)
}

// readTasks reads and folds the board into the model, and reports whether a write seen
// live is not in the read yet.
func (w *TeamWatcher) readTasks(ctx context.Context, b *watchedBucket, log *slog.Logger) (missing bool) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := client.ScanBucket(rctx, w.Conn, b.name, ">", 0)
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("task board %s: %w", b.name, err)
			log.Warn("task board not read", "err", err)
			w.setErr(&w.tasksErr, err)
		}
		return false
	}
	missing = b.shown(recs)
	rows := make([]taskboard.Row, len(recs))
	for i, r := range recs {
		rows[i] = taskboard.Row{Key: r.Key, Value: r.Value, Seq: r.Seq, Deleted: r.Op != jetstream.KeyValuePut}
	}
	lease := w.Lease
	if lease == 0 {
		lease = taskboard.Lease
	}
	folded := taskboard.Fold(rows, w.now(), lease)
	tasks := make([]Task, len(folded))
	for i, t := range folded {
		tasks[i] = TaskOf(t)
	}
	w.Model.SetTasks(tasks)
	w.setErr(&w.tasksErr, nil)
	return missing
}

// readClaims reads the live claims into the model, and reports whether a write seen live
// is not in the read yet (checked on a raw read first, only when one is pending).
func (w *TeamWatcher) readClaims(ctx context.Context, b *watchedBucket, js jetstream.JetStream, log *slog.Logger) (missing bool) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if b.waiting() {
		recs, err := client.ScanBucket(rctx, w.Conn, b.name, ">", 0)
		if err == nil {
			missing = b.shown(recs)
		}
	}
	all, err := (&claims.Store{JS: js, Space: w.Space, Now: w.now}).List(rctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("file claims not read", "err", err)
			w.setErr(&w.claimErr, err)
		}
		return false
	}
	cs := make([]Claim, len(all))
	for i, c := range all {
		cs[i] = ClaimOf(c)
	}
	w.Model.SetClaims(cs)
	w.setErr(&w.claimErr, nil)
	return missing
}

// waiting reports whether a write seen live is not yet shown by a read.
func (b *watchedBucket) waiting() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) > 0
}

func (w *TeamWatcher) setErr(dst *error, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*dst = err
}
