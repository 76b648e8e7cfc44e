// Package claims keeps a space's advisory file claims: an agent editing one repository
// with others says which paths it works on (exclusive, or shared with other readers), for
// how long, and why; every peer sees the claims, and a claim that overlaps another one it
// conflicts with is refused with who holds what, since when and why. Claims expire: each
// lives for its ttl (at most MaxTTL) from its last write, whether or not its holder is
// still running, so a killed agent's claims lapse on their own; the holder extends one by
// claiming it again. They live in the KV bucket cotal_claims_<space> under keys the
// broker lets only their holder write.
package claims

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// deleteMarkerTTL is how long a release's delete marker stays before the broker drops it
// (and with it the key).
const deleteMarkerTTL = time.Minute

// Store reads and writes one space's claims as one holder. Set the fields before the
// first method call.
type Store struct {
	JS     jetstream.JetStream // the space's JetStream; required
	Space  string              // required
	Holder protocol.Principal  // who claims and releases; required for Claim and Release
	Name   string              // the holder's display name, stored with each claim
	// Root is the repository's absolute path: an absolute path under it is claimed
	// relative to it. "" refuses every absolute path.
	Root string
	Now  func() time.Time // nil means time.Now
}

// Request is one claim call.
type Request struct {
	Paths     []string      // 1 to MaxPaths paths, relative to the repository
	TTL       time.Duration // MinTTL to MaxTTL
	Exclusive bool          // exclusive: conflicts with any overlapping claim; shared: only with exclusive ones
	Reason    string        // why, at most MaxReasonLength bytes
}

// Conflict is a path asked for and a claim of another holder it conflicts with.
type Conflict struct {
	Path string // the normalised path asked for
	Held Claim  // the claim in the way
}

// Result is what Claim did: every path granted, or (with Conflicts) none.
type Result struct {
	Granted   []Claim
	Renewed   []string // paths of Granted the holder already held, now extended
	Conflicts []Conflict
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) bucket() string { return Bucket(s.Space) }

// List returns every live claim of the space, sorted by path, then holder. A record
// whose holder or path does not match its key is dropped, as is an expired one.
func (s *Store) List(ctx context.Context) ([]Claim, error) {
	recs, err := scan(ctx, s.JS.Conn(), s.bucket())
	if err != nil {
		return nil, fmt.Errorf("claims of space %q: %w", s.Space, err)
	}
	now := s.now()
	var out []Claim
	for _, r := range recs {
		if r.Op != jetstream.KeyValuePut {
			continue
		}
		rec, err := decode(r.Key, r.Value)
		if err != nil {
			continue // a record that is not its key's: nobody's claim
		}
		c := Claim{Record: rec, Seq: r.Seq, Stored: r.Stored}
		if !c.ExpiresAt().After(now) {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Claim) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Holder, b.Holder))
	})
	return out, nil
}

// Mine returns the holder's own live claims.
func (s *Store) Mine(ctx context.Context) ([]Claim, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	me := s.Holder.String()
	return slices.DeleteFunc(all, func(c Claim) bool { return c.Holder != me }), nil
}

// check validates req and returns its normalised, deduplicated paths.
func (s *Store) check(req Request) ([]string, error) {
	if err := s.Holder.Validate(); err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	if len(req.Paths) == 0 || len(req.Paths) > MaxPaths {
		return nil, fmt.Errorf("%d paths: claim 1 to %d at once", len(req.Paths), MaxPaths)
	}
	if req.TTL < MinTTL || req.TTL > MaxTTL {
		return nil, fmt.Errorf("ttl %s: want %s to %s", req.TTL, MinTTL, MaxTTL)
	}
	if len(req.Reason) > MaxReasonLength {
		return nil, fmt.Errorf("reason of %d bytes: at most %d", len(req.Reason), MaxReasonLength)
	}
	return s.normalize(req.Paths)
}

func (s *Store) normalize(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		n, err := Normalize(p, s.Root)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// conflicts lists, for each path, the claims of other holders in held it conflicts with.
func (s *Store) conflicts(paths []string, exclusive bool, held []Claim, before uint64) []Conflict {
	me := s.Holder.String()
	var out []Conflict
	for _, p := range paths {
		for _, c := range held {
			if c.Holder != me && (before == 0 || c.Seq < before) && Conflicts(p, exclusive, c.Path, c.Exclusive) {
				out = append(out, Conflict{Path: p, Held: c})
			}
		}
	}
	return out
}

// Claim claims every path of req, or none: when one conflicts with another holder's claim
// it writes nothing and returns the conflicts (a nil error). A path the holder already
// claims is renewed (its since kept, its ttl, kind and reason replaced). Two holders
// racing for overlapping paths both write, then read again: the later write sees the
// earlier and withdraws, so exactly one wins.
func (s *Store) Claim(ctx context.Context, req Request) (Result, error) {
	paths, err := s.check(req)
	if err != nil {
		return Result{}, err
	}
	held, err := s.List(ctx)
	if err != nil {
		return Result{}, err
	}
	if cs := s.conflicts(paths, req.Exclusive, held, 0); len(cs) > 0 {
		return Result{Conflicts: cs}, nil
	}
	me := s.Holder.String()
	now := s.now()
	var res Result
	var fresh []string // paths this call claimed anew: withdrawn if it lost a race
	var lastSeq uint64
	for _, p := range paths {
		rec := Record{Holder: me, Name: s.Name, Path: p, Exclusive: req.Exclusive, Reason: req.Reason,
			Since: now.UnixMilli(), Renewed: now.UnixMilli(), Expires: now.Add(req.TTL).UnixMilli()}
		if i := slices.IndexFunc(held, func(c Claim) bool { return c.Holder == me && c.Path == p }); i >= 0 {
			rec.Since = held[i].Since
			res.Renewed = append(res.Renewed, p)
		} else {
			fresh = append(fresh, p)
		}
		seq, err := s.put(ctx, rec, req.TTL)
		if err != nil {
			return Result{}, errors.Join(err, s.withdraw(ctx, fresh))
		}
		lastSeq = max(lastSeq, seq)
		res.Granted = append(res.Granted, Claim{Record: rec, Seq: seq, Stored: now})
	}
	if len(fresh) == 0 {
		return res, nil
	}
	// The race check: a conflicting claim stored before ours, that our first read missed.
	after, err := s.List(ctx)
	if err != nil {
		return Result{}, errors.Join(err, s.withdraw(ctx, fresh))
	}
	if cs := s.conflicts(fresh, req.Exclusive, after, lastSeq); len(cs) > 0 {
		if err := s.withdraw(ctx, fresh); err != nil {
			return Result{}, err
		}
		return Result{Conflicts: cs}, nil
	}
	return res, nil
}

// put writes rec under its key with a per-message TTL, and returns its stream sequence.
func (s *Store) put(ctx context.Context, rec Record, ttl time.Duration) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode claim %s: %w", rec.Path, err)
	}
	subj := "$KV." + s.bucket() + "." + Key(s.Holder, rec.Path)
	ack, err := s.JS.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: b}, jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, fmt.Errorf("claim %s: %w", rec.Path, err)
	}
	return ack.Sequence, nil
}

// del writes the delete marker of the holder's claim of path.
func (s *Store) del(ctx context.Context, path string) error {
	m := &nats.Msg{Subject: "$KV." + s.bucket() + "." + Key(s.Holder, path), Header: nats.Header{"KV-Operation": []string{"DEL"}}}
	if _, err := s.JS.PublishMsg(ctx, m, jetstream.WithMsgTTL(deleteMarkerTTL)); err != nil {
		return fmt.Errorf("release %s: %w", path, err)
	}
	return nil
}

func (s *Store) withdraw(ctx context.Context, paths []string) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, s.del(ctx, p))
	}
	return errors.Join(errs...)
}

// Release releases the holder's claims of paths (every claim of the holder with all) and
// returns the paths it released; a path the holder does not claim is in notHeld.
func (s *Store) Release(ctx context.Context, paths []string, all bool) (released, notHeld []string, err error) {
	if err := s.Holder.Validate(); err != nil {
		return nil, nil, fmt.Errorf("holder: %w", err)
	}
	if !all && (len(paths) == 0 || len(paths) > MaxPaths) {
		return nil, nil, fmt.Errorf("%d paths: release 1 to %d at once, or all", len(paths), MaxPaths)
	}
	want, err := s.normalize(paths)
	if err != nil {
		return nil, nil, err
	}
	mine, err := s.Mine(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range mine {
		if all || slices.Contains(want, c.Path) {
			if err := s.del(ctx, c.Path); err != nil {
				return released, nil, err
			}
			released = append(released, c.Path)
		}
	}
	for _, p := range want {
		if !slices.Contains(released, p) {
			notHeld = append(notHeld, p)
		}
	}
	return released, notHeld, nil
}
