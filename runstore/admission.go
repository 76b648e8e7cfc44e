package runstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/jcs"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// Subject allow modes of an admission ceiling.
const (
	AllowAll      = "all"
	AllowNone     = "none"
	AllowPatterns = "patterns"
)

// SubjectAllow is one direction's allow list: every subject, none, or the listed patterns.
type SubjectAllow struct {
	Mode     string   `json:"mode"`
	Patterns []string `json:"patterns,omitempty"`
}

// SubjectPermission is one direction of a ceiling: what it allows and what it denies.
type SubjectPermission struct {
	Allow SubjectAllow `json:"allow"`
	Deny  []string     `json:"deny"`
}

// Ceiling is the channel authority a run is admitted under (publish and subscribe).
type Ceiling struct {
	Publish   SubjectPermission `json:"publish"`
	Subscribe SubjectPermission `json:"subscribe"`
}

// Caller is whom a run was admitted for.
type Caller struct {
	Owner      string `json:"owner"`
	Actor      string `json:"actor"`
	UID        string `json:"uid"`
	Generation string `json:"generation,omitempty"`
}

// IssuedRef pins the issued authority an admission snapshots.
type IssuedRef struct {
	Space      string `json:"space"`
	Owner      string `json:"owner"`
	Actor      string `json:"actor"`
	UID        string `json:"uid"`
	Generation string `json:"generation"`
}

// Provenance is where a run's authority came from: "issued" (a served start, Ref and
// ResolvedRevision set) or "operator" (a local drive, By and Reason set).
type Provenance struct {
	Kind             string     `json:"kind"`
	Ref              *IssuedRef `json:"ref,omitempty"`
	ResolvedRevision int64      `json:"resolvedRevision,omitempty"`
	By               string     `json:"by,omitempty"`
	Reason           string     `json:"reason,omitempty"`
}

// Admission is a run's admission record (run-admission.ts): written once, create-only,
// before the run is driven, and never rewritten; stored as canonical JSON.
type Admission struct {
	Version    int        `json:"version"`
	Space      string     `json:"space"`
	Endpoint   string     `json:"endpoint"`
	RunID      string     `json:"runId"`
	InstanceID string     `json:"instanceId"`
	Caller     Caller     `json:"caller"`
	Ceiling    Ceiling    `json:"ceiling"`
	Provenance Provenance `json:"provenance"`
	AdmittedAt int64      `json:"admittedAt"`
}

// Revocation is a run's revocation marker: a separate create-only record beside its
// admission; a host reads it before every channel effect, and no resume continues the run.
type Revocation struct {
	Version   int    `json:"version"`
	RunID     string `json:"runId"`
	Reason    string `json:"reason"`
	By        string `json:"by"`
	RevokedAt int64  `json:"revokedAt"`
}

// AdmissionKey is the key of a run's admission in the admissions bucket.
func AdmissionKey(endpoint, run string) string { return protocol.RunAdmissionKey(endpoint, run) }

// RevocationKey is the key of a run's revocation marker in the admissions bucket.
func RevocationKey(endpoint, run string) string { return "revoked.v1." + endpoint + "." + run }

// Check refuses an admission the reference's reader would refuse: another version, a
// missing coordinate, an allow mode it does not know, a provenance of the wrong shape.
func (a Admission) Check() error {
	if a.Version != 1 {
		return fmt.Errorf("admission: version %d, want 1", a.Version)
	}
	for what, id := range map[string]string{"space": a.Space, "endpoint": a.Endpoint, "run id": a.RunID} {
		if err := CheckID("admission "+what, id); err != nil {
			return err
		}
	}
	if a.InstanceID == "" || a.AdmittedAt <= 0 || a.Caller.Owner == "" || a.Caller.Actor == "" || a.Caller.UID == "" {
		return errors.New("admission: want an instance id, a caller (owner, actor, uid) and an admission time")
	}
	for _, p := range []SubjectPermission{a.Ceiling.Publish, a.Ceiling.Subscribe} {
		switch p.Allow.Mode {
		case AllowAll, AllowNone:
			if p.Allow.Patterns != nil {
				return fmt.Errorf("admission: allow mode %q carries patterns", p.Allow.Mode)
			}
		case AllowPatterns:
			if len(p.Allow.Patterns) == 0 {
				return errors.New("admission: allow mode patterns needs at least one pattern")
			}
		default:
			return fmt.Errorf("admission: unknown allow mode %q", p.Allow.Mode)
		}
		if p.Deny == nil {
			return errors.New("admission: a ceiling direction needs a deny list (empty is fine)")
		}
	}
	switch pv := a.Provenance; pv.Kind {
	case "operator":
		if pv.By == "" || pv.Reason == "" || pv.Ref != nil || pv.ResolvedRevision != 0 {
			return errors.New("admission: an operator provenance is {kind, by, reason}")
		}
	case "issued":
		if pv.Ref == nil || pv.ResolvedRevision <= 0 || pv.By != "" || pv.Reason != "" {
			return errors.New("admission: an issued provenance is {kind, ref, resolvedRevision}")
		}
	default:
		return fmt.Errorf("admission: unknown provenance %q", pv.Kind)
	}
	return nil
}

// ChannelAllow is the ceiling direction a local start names on its command line: the
// channels it lists as subject patterns (made by subject), or none.
func ChannelAllow(channels []string, subject func(channel string) string) SubjectPermission {
	if len(channels) == 0 || (len(channels) == 1 && channels[0] == AllowNone) {
		return SubjectPermission{Allow: SubjectAllow{Mode: AllowNone}, Deny: []string{}}
	}
	pats := make([]string, len(channels))
	for i, ch := range channels {
		pats[i] = subject(ch)
	}
	return SubjectPermission{Allow: SubjectAllow{Mode: AllowPatterns, Patterns: pats}, Deny: []string{}}
}

// Admissions is the space's run admissions bucket.
type Admissions struct {
	KV jetstream.KeyValue
}

// OpenAdmissions binds the admissions bucket of space; provision.Space makes it.
func OpenAdmissions(ctx context.Context, js jetstream.JetStream, space string) (*Admissions, error) {
	kv, err := js.KeyValue(ctx, provision.BucketAdmission(space))
	if err != nil {
		return nil, fmt.Errorf("admissions bucket %s: %w (run `cotal up` to provision it)", provision.BucketAdmission(space), err)
	}
	return &Admissions{KV: kv}, nil
}

// Admit writes a run's admission, create-only and canonical. A run is admitted once: an
// identical retry is success, another admission is ErrConflict.
func (s *Admissions) Admit(ctx context.Context, a Admission) error {
	if err := a.Check(); err != nil {
		return err
	}
	return createCanonical(ctx, s.KV, AdmissionKey(a.Endpoint, a.RunID), a)
}

// Revoke files a run's revocation marker, create-only; a run revoked already keeps its
// first marker, which it answers.
func (s *Admissions) Revoke(ctx context.Context, endpoint string, r Revocation) (Revocation, error) {
	if r.Version != 1 || CheckID("run id", r.RunID) != nil || r.By == "" || r.Reason == "" || r.RevokedAt <= 0 {
		return Revocation{}, errors.New("revocation: want version 1, a run id, who revokes, why, and when")
	}
	err := createCanonical(ctx, s.KV, RevocationKey(endpoint, r.RunID), r)
	if err != nil && !errors.Is(err, ErrConflict) {
		return Revocation{}, err
	}
	got, err := s.Revoked(ctx, endpoint, r.RunID)
	if err != nil {
		return Revocation{}, err
	}
	if got == nil {
		return Revocation{}, fmt.Errorf("revoke run %s: the marker cannot be read back", r.RunID)
	}
	return *got, nil
}

// Admission reads a run's admission; ErrNoRecord when it has none.
func (s *Admissions) Admission(ctx context.Context, endpoint, run string) (Admission, error) {
	var a Admission
	if err := s.get(ctx, AdmissionKey(endpoint, run), &a); err != nil {
		return Admission{}, err
	}
	if err := a.Check(); err != nil {
		return Admission{}, fmt.Errorf("record %s: %w", AdmissionKey(endpoint, run), err)
	}
	if a.Endpoint != endpoint || a.RunID != run {
		return Admission{}, fmt.Errorf("record %s names run %s on %s", AdmissionKey(endpoint, run), a.RunID, a.Endpoint)
	}
	return a, nil
}

// Revoked reads a run's revocation marker: nil when there is none. A marker that cannot
// be read is an error, never an absence.
func (s *Admissions) Revoked(ctx context.Context, endpoint, run string) (*Revocation, error) {
	var r Revocation
	err := s.get(ctx, RevocationKey(endpoint, run), &r)
	if errors.Is(err, ErrNoRecord) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.Version != 1 || r.RunID != run || r.RevokedAt <= 0 {
		return nil, fmt.Errorf("record %s: a malformed revocation", RevocationKey(endpoint, run))
	}
	return &r, nil
}

func (s *Admissions) get(ctx context.Context, key string, v any) error {
	e, err := s.KV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("record %s: %w", key, ErrNoRecord)
	}
	if err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	if err := strictjson.Decode(e.Value(), v); err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	return nil
}

// createCanonical writes v's canonical JSON at key, create-only: an identical record
// there already is success, another is ErrConflict.
func createCanonical(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := jcs.Marshal(v)
	if err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	if _, err := kv.Create(ctx, key, b); err == nil {
		return nil
	} else if !casLoss(err) {
		return fmt.Errorf("record %s: %w", key, err)
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("record %s: %w: it was written before and cannot be read back: %v", key, ErrConflict, err)
	}
	if !bytes.Equal(e.Value(), b) {
		return fmt.Errorf("record %s: %w: another value is recorded", key, ErrConflict)
	}
	return nil
}
