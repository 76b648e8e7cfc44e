// Package spacehost runs one lane per space named in a manifest, in one process. Lanes
// share the process and nothing else; every lane line is logged with a [<space>] prefix
// (see PrefixHandler). A lane that fails to open or fails later is reopened every
// RetryDelay while it fails. The host watches the manifest's folder and reloads on
// Reload (wired to SIGHUP by commands): a space added opens, a space removed closes, a
// changed entry closes and opens again. Once every space the manifest does not name has no
// lane left, the host writes <manifest>.applied: the lowercase hex SHA-256 of the exact
// manifest bytes and a newline.
//
// At most MaxOpening lanes open at once: a host of thousands of spaces would otherwise
// dial thousands of broker connections in the same instant, and on a busy broker their
// handshakes outlast the connect timeout. A lane's turn ends once it serves, once its
// attempt ends, or after OpenHold (a lane that waits to serve, for a lease another
// process holds, lets the next ones open).
package spacehost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// Lane serves one space until ctx ends or the lane fails.
type Lane interface {
	// Run opens the lane, calls ready() once it serves, and blocks. It returns nil after a
	// clean close and an error that names the cause otherwise (fenced, broker lost, ...).
	Run(ctx context.Context, ready func()) error
}

// Policy is what a host does at startup with a space it cannot serve.
type Policy int

const (
	// ServeWhatYouCan starts with the spaces that open, names each one that does not with
	// the reason, and retries those every RetryDelay.
	ServeWhatYouCan Policy = iota
	// AllOrNone refuses startup if any space fails to open, closing the lanes it opened
	// (and never reopening them).
	AllOrNone
)

// ErrManifestFolder is wrapped by Run's error when it cannot write <manifest>.applied: the
// manifest's folder must be writable.
var ErrManifestFolder = errors.New("cannot acknowledge the manifest")

// Defaults of the Host's durations.
const (
	DefaultRetryDelay   = 5 * time.Second
	DefaultCloseTimeout = 10 * time.Second
	DefaultMaxOpening   = 32
	DefaultOpenHold     = 10 * time.Second
)

// Failure is a space a host could not serve, with the reason.
type Failure struct {
	Space string
	Err   error
}

// Ready is what a host serves once every space of the initial manifest opened or failed
// its first attempt.
type Ready struct {
	Serving  []string  // spaces whose lanes serve, in manifest order
	Retrying []Failure // spaces the host retries every RetryDelay, in manifest order
}

// RetryingNames returns the names of the spaces in r.Retrying.
func (r Ready) RetryingNames() []string {
	out := make([]string, len(r.Retrying))
	for i, f := range r.Retrying {
		out[i] = f.Space
	}
	return out
}

// Host runs one lane per space of a manifest. Set its fields before Run; call Reload from
// any goroutine while Run runs.
type Host struct {
	// Manifest is the path of the space manifest (read into a SpaceList); its folder must be
	// writable (for <manifest>.applied).
	Manifest string
	// NewLane builds the lane of one space from its manifest entry, with log, the host's
	// logger With("space", entry.Space), for the lane's lines. It is called for every
	// attempt, from the lane's own goroutine (so from several at once); an error counts as
	// a failed open.
	NewLane func(entry Entry, log *slog.Logger) (Lane, error)
	// Settings parses a version 2 entry (see ParseSpaceList); nil allows "space" only.
	Settings func(entry json.RawMessage) (any, error)
	Policy   Policy
	// Fatal, when set, reports a lane error that stops the whole host: Run closes every
	// lane and returns it (a broker lost for the whole process, for example).
	Fatal        func(err error) bool
	RetryDelay   time.Duration // between attempts of a failing lane; 0 means 5 s
	CloseTimeout time.Duration // how long a closing lane may take before it is reported; 0 means 10 s
	MaxOpening   int           // lanes opening at once; 0 means DefaultMaxOpening
	OpenHold     time.Duration // longest a lane's turn to open lasts before the next lane's starts; 0 means 10 s
	Logger       *slog.Logger  // nil means discard; wrap its handler in a PrefixHandler

	once   sync.Once
	reload chan struct{}
}

// Reload asks a running host to read its manifest again.
func (h *Host) Reload() {
	select {
	case h.reloadCh() <- struct{}{}:
	default: // one is already pending
	}
}

func (h *Host) reloadCh() chan struct{} {
	h.once.Do(func() { h.reload = make(chan struct{}, 1) })
	return h.reload
}

// AppliedPath is where the host acknowledges manifest: manifest + ".applied".
func AppliedPath(manifest string) string { return manifest + ".applied" }

// Hash is the acknowledgment of manifest bytes data: lowercase hex SHA-256.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// slot is one run of a space's lane supervisor: attempts until its ctx ends.
type slot struct {
	entry   Entry
	cancel  context.CancelFunc
	done    chan struct{} // closed once the supervisor (and its last Run) returned
	closing bool
	since   time.Time // when closing started
	warned  bool
}

// event is what a supervisor tells the host loop.
type event struct {
	s     *slot
	ready bool  // the lane serves
	err   error // the attempt failed (ready false)
	first bool  // the slot's first attempt
	exit  bool  // the supervisor returned
}

// state is the host loop's, owned by Run's goroutine.
type state struct {
	h       *Host
	ctx     context.Context
	log     *slog.Logger
	events  chan event
	cur     *SpaceList
	curHash string
	stop    context.CancelFunc // ends every lane
	opening chan struct{}      // a token per lane taking its turn to open (MaxOpening)
	acked   string             // the hash .applied holds
	active  map[string]*slot   // the serving (or retrying) slot of each named space
	closing []*slot            // slots asked to close whose supervisor has not returned
	wg      sync.WaitGroup
	// readyReports is true when Run has a ready callback, which reports the spaces whose
	// first attempt failed.
	readyReports bool
}

// check validates the fields without I/O and returns a copy with the defaults filled in.
func (h *Host) check() (*Host, error) {
	c := &Host{Manifest: h.Manifest, NewLane: h.NewLane, Settings: h.Settings, Policy: h.Policy, Fatal: h.Fatal,
		RetryDelay: h.RetryDelay, CloseTimeout: h.CloseTimeout, MaxOpening: h.MaxOpening, OpenHold: h.OpenHold, Logger: h.Logger}
	if c.Manifest == "" {
		return c, errors.New("no manifest path")
	}
	if c.NewLane == nil {
		return c, errors.New("no lane constructor")
	}
	if c.RetryDelay < 0 || c.CloseTimeout < 0 || c.MaxOpening < 0 || c.OpenHold < 0 {
		return c, errors.New("negative retry delay, close timeout, lanes opening or open hold")
	}
	if c.MaxOpening == 0 {
		c.MaxOpening = DefaultMaxOpening
	}
	if c.OpenHold == 0 {
		c.OpenHold = DefaultOpenHold
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Run reads and parses the manifest (refusing to start when it does not read or parse
// whole), writes <manifest>.applied (refusing to start when it cannot), opens a lane per
// space and calls ready once every space opened or failed its first attempt. Under
// AllOrNone a failed space refuses startup: Run closes the lanes it opened and returns the
// failure. Then it serves until ctx ends (nil, after every lane returned) or Fatal
// reports a lane error (that error, after every lane returned). A space whose first
// attempt failed is logged at warn level only with a nil ready; ready reports it (in
// Ready.Retrying) otherwise, and the log has it at debug level, so it is said once.
func (h *Host) Run(ctx context.Context, ready func(Ready)) error {
	cfg, err := h.check()
	if err != nil {
		return fmt.Errorf("space host: %w", err)
	}
	m, hash, err := cfg.apply()
	if err != nil {
		return fmt.Errorf("space host: %w", err)
	}
	dir := filepath.Dir(cfg.Manifest)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("space host: watch %s: %w", dir, err)
	}
	defer watcher.Close()
	if err := watcher.Add(dir); err != nil {
		return fmt.Errorf("space host: watch %s: %w", dir, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &state{h: cfg, ctx: runCtx, stop: cancel, log: cfg.Logger, events: make(chan event, 16), cur: m,
		curHash: hash, acked: hash, active: map[string]*slot{}, opening: make(chan struct{}, cfg.MaxOpening),
		readyReports: ready != nil}
	defer st.wg.Wait()
	defer st.closeAll()
	cfg.Logger.Info("manifest applied", "manifest", cfg.Manifest, "sha256", hash, "spaces", strings.Join(m.Names(), ","))

	r, up, err := st.startup(ctx, m)
	if !up {
		return err
	}
	if ready != nil {
		ready(r)
	}
	return st.serve(ctx, h.reloadCh(), watcher)
}

// apply reads and parses the manifest whole and acknowledges it in <manifest>.applied,
// returning it with its hash.
func (h *Host) apply() (*SpaceList, string, error) {
	data, err := os.ReadFile(h.Manifest)
	if err != nil {
		return nil, "", fmt.Errorf("read manifest: %w", err)
	}
	m, err := ParseSpaceList(data, h.Settings)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", h.Manifest, err)
	}
	hash := Hash(data)
	if err := atomicfile.WriteFile(AppliedPath(h.Manifest), []byte(hash+"\n"), 0o644); err != nil {
		return nil, "", fmt.Errorf("%w: the manifest's folder %s must be writable for %s: %w",
			ErrManifestFolder, filepath.Dir(h.Manifest), filepath.Base(AppliedPath(h.Manifest)), err)
	}
	return m, hash, nil
}

// startup opens a lane per space of m and waits for the first attempt of each. up is false
// when the host stops instead: ctx ended (err nil), Fatal reported a lane error, or under
// AllOrNone a space failed.
func (st *state) startup(ctx context.Context, m *SpaceList) (r Ready, up bool, err error) {
	pending := map[*slot]bool{}
	failures := map[string]error{}
	for _, e := range m.Spaces {
		pending[st.open(e)] = true
	}
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return Ready{}, false, nil
		case ev := <-st.events:
			if ev.exit || !ev.first || !pending[ev.s] {
				if err := st.handle(ev); err != nil {
					return Ready{}, false, err
				}
				continue
			}
			delete(pending, ev.s)
			if ev.err == nil {
				continue
			}
			if err := st.firstFailure(ev); err != nil {
				return Ready{}, false, err
			}
			failures[ev.s.entry.Space] = ev.err
		}
	}
	for _, e := range m.Spaces {
		if err, failed := failures[e.Space]; failed {
			r.Retrying = append(r.Retrying, Failure{Space: e.Space, Err: err})
		} else {
			r.Serving = append(r.Serving, e.Space)
		}
	}
	return r, true, nil
}

// firstFailure decides on a space whose first attempt failed: an error stops the host
// (a fatal lane error, or any failure under AllOrNone); nil means retry it.
func (st *state) firstFailure(ev event) error {
	if st.h.Fatal != nil && st.h.Fatal(ev.err) {
		return ev.err
	}
	if st.h.Policy == AllOrNone {
		return fmt.Errorf("space host: refusing to start: space %s: %w", ev.s.entry.Space, ev.err)
	}
	level := slog.LevelWarn
	if st.readyReports {
		level = slog.LevelDebug // Ready.Retrying carries it to the person
	}
	st.spaceLog(ev.s.entry.Space).Log(st.ctx, level, "cannot serve space; retrying", "every", st.h.RetryDelay, "err", ev.err)
	return nil
}

// serve follows the manifest (its edits, and reload) and the lanes' events until ctx ends
// (nil) or Fatal reports a lane error (that error).
func (st *state) serve(ctx context.Context, reload <-chan struct{}, watcher *fsnotify.Watcher) error {
	tick := time.NewTicker(st.h.CloseTimeout)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reload:
			st.reloadManifest()
		case we, ok := <-watcher.Events:
			if ok && filepath.Clean(we.Name) == filepath.Clean(st.h.Manifest) &&
				we.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
				st.reloadManifest()
			}
		case werr, ok := <-watcher.Errors:
			if ok {
				st.log.Warn("manifest watch", "dir", filepath.Dir(st.h.Manifest), "err", werr)
			}
		case ev := <-st.events:
			if err := st.handle(ev); err != nil {
				return err
			}
		case <-tick.C:
			st.checkClosing()
			st.ack()
		}
	}
}

func (st *state) spaceLog(space string) *slog.Logger { return st.log.With("space", space) }

// open starts the supervisor of entry's space.
func (st *state) open(e Entry) *slot {
	ctx, cancel := context.WithCancel(st.ctx)
	s := &slot{entry: e, cancel: cancel, done: make(chan struct{})}
	st.active[e.Space] = s
	st.wg.Add(1)
	go st.supervise(ctx, s)
	return s
}

// send delivers ev to the host loop unless the host stopped.
func (st *state) send(ev event) {
	select {
	case st.events <- ev:
	case <-st.ctx.Done():
	}
}

// supervise runs s's lane, reopening it every RetryDelay while it fails, until its ctx ends.
func (st *state) supervise(ctx context.Context, s *slot) {
	defer st.wg.Done()
	defer func() {
		close(s.done)
		st.send(event{s: s, exit: true})
	}()
	log := st.spaceLog(s.entry.Space)
	first := true
	for {
		err := st.attempt(ctx, s, log, first)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("lane stopped by itself")
		}
		st.send(event{s: s, err: err, first: first})
		first = false
		select {
		case <-ctx.Done():
			return
		case <-time.After(st.h.RetryDelay):
		}
	}
}

// attempt builds and runs the lane once, in its turn to open (turn).
func (st *state) attempt(ctx context.Context, s *slot, log *slog.Logger, first bool) error {
	done, err := st.turn(ctx)
	if err != nil {
		return err
	}
	defer done()
	lane, err := st.h.NewLane(s.entry, log)
	if err != nil {
		return err // callers name the space
	}
	var once sync.Once
	return lane.Run(ctx, func() {
		done()
		once.Do(func() { st.send(event{s: s, ready: true, first: first}) })
	})
}

// turn waits until fewer than MaxOpening lanes are opening and returns the function that
// ends this lane's turn (safe to call more than once); the turn also ends by itself after
// OpenHold. It returns ctx's error if ctx ends first.
func (st *state) turn(ctx context.Context) (func(), error) {
	select {
	case st.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	free := func() { once.Do(func() { <-st.opening }) }
	t := time.AfterFunc(st.h.OpenHold, free)
	return func() {
		t.Stop()
		free()
	}, nil
}

// handle processes a supervisor's event after startup; a fatal lane error is returned.
func (st *state) handle(ev event) error {
	log := st.spaceLog(ev.s.entry.Space)
	switch {
	case ev.exit:
		st.exited(ev.s)
	case ev.ready:
		if !ev.first {
			log.Info("lane reopened")
		} else {
			log.Info("lane open")
		}
	case ev.err != nil:
		if st.h.Fatal != nil && st.h.Fatal(ev.err) {
			return ev.err
		}
		log.Warn("lane failed; retrying", "every", st.h.RetryDelay, "err", ev.err)
	}
	return nil
}

// exited forgets a returned supervisor, opens its space again when the manifest names it
// and no lane serves it, and acknowledges the manifest when it can.
func (st *state) exited(s *slot) {
	if i := slices.Index(st.closing, s); i >= 0 {
		st.closing = slices.Delete(st.closing, i, i+1)
		st.spaceLog(s.entry.Space).Info("lane closed")
	}
	if st.active[s.entry.Space] == s {
		delete(st.active, s.entry.Space) // the supervisor ended without being asked
	}
	if st.ctx.Err() != nil {
		return
	}
	if e, named := st.cur.entry(s.entry.Space); named && st.active[e.Space] == nil && !st.isClosing(e.Space) {
		st.open(e)
	}
	st.ack()
}

func (st *state) isClosing(space string) bool {
	return slices.ContainsFunc(st.closing, func(s *slot) bool { return s.entry.Space == space })
}

// closeSlot asks s to close.
func (st *state) closeSlot(s *slot) {
	delete(st.active, s.entry.Space)
	s.closing, s.since = true, time.Now()
	st.closing = append(st.closing, s)
	s.cancel()
}

// closeAll asks every lane to close (the host is stopping).
func (st *state) closeAll() {
	st.stop() // supervisors no longer report once the host stops
	for _, s := range st.active {
		s.cancel()
	}
	for _, s := range st.closing {
		s.cancel()
	}
}

// checkClosing reports lanes that have not confirmed their close within CloseTimeout.
func (st *state) checkClosing() {
	for _, s := range st.closing {
		if !s.warned && time.Since(s.since) >= st.h.CloseTimeout {
			s.warned = true
			st.spaceLog(s.entry.Space).Warn("lane has not confirmed its close; holding the manifest acknowledgment back",
				"waited", st.h.CloseTimeout)
		}
	}
}

// reloadManifest reads the manifest again and applies it; a manifest that does not read
// or parse whole is logged and ignored, keeping the current lanes.
func (st *state) reloadManifest() {
	data, err := os.ReadFile(st.h.Manifest)
	if err != nil {
		st.log.Warn("manifest ignored: keeping the current lanes", "manifest", st.h.Manifest, "err", err)
		return
	}
	hash := Hash(data)
	if hash == st.curHash {
		return
	}
	m, err := ParseSpaceList(data, st.h.Settings)
	if err != nil {
		st.log.Warn("manifest ignored: keeping the current lanes", "manifest", st.h.Manifest, "err", err)
		return
	}
	st.log.Info("manifest changed", "manifest", st.h.Manifest, "sha256", hash, "spaces", strings.Join(m.Names(), ","))
	st.cur, st.curHash = m, hash
	for space, s := range st.active {
		e, named := m.entry(space)
		switch {
		case !named:
			st.spaceLog(space).Info("space removed from the manifest; closing its lane")
			st.closeSlot(s)
		case string(e.Raw) != string(s.entry.Raw):
			st.spaceLog(space).Info("space entry changed; reopening its lane")
			st.closeSlot(s)
		}
	}
	for _, e := range m.Spaces {
		if st.active[e.Space] != nil {
			continue
		}
		if st.isClosing(e.Space) {
			st.spaceLog(e.Space).Info("space waits for its previous lane to close")
			continue
		}
		st.spaceLog(e.Space).Info("space added; opening its lane")
		st.open(e)
	}
	st.ack()
}

// ack writes <manifest>.applied once no lane is left for a space the manifest does not
// name; a failed write is logged and tried again later.
func (st *state) ack() {
	if st.acked == st.curHash {
		return
	}
	for _, s := range st.closing {
		if _, named := st.cur.entry(s.entry.Space); !named {
			return
		}
	}
	path := AppliedPath(st.h.Manifest)
	if err := atomicfile.WriteFile(path, []byte(st.curHash+"\n"), 0o644); err != nil {
		st.log.Error("cannot acknowledge the manifest", "path", path, "err", err)
		return
	}
	st.acked = st.curHash
	st.log.Info("manifest applied", "manifest", st.h.Manifest, "sha256", st.curHash)
}
