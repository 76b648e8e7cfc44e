// Package ledger keeps a space's actor ledger: which IdP subjects may act as which actor,
// and with what permissions. Each actor is one row in the space's user-auth KV bucket
// (provision.BucketAuth) under the key "actor.<actor>", as JSON. A grant replaces the whole
// row; a revoke deletes it or removes one subject. Reads are fresh, so a change bites at the
// next exchange and the next connect. No row means not granted: an empty ledger denies all.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// keyPrefix starts every actor row's key.
const keyPrefix = "actor."

// Limits on a row's free-text fields.
const (
	MaxSubjectLength = 255 // one IdP subject, in bytes
	MaxLabelLength   = 128 // the label, in bytes
)

// The scopes a row may carry besides "role:<r>".
const (
	ScopeSpawn      = "spawn"     // may spawn agents
	ScopeAdmin      = "admin"     // administrative operations; never a default
	ScopeSupervise  = "supervise" // may supervise (the manager-service view)
	ScopeRolePrefix = "role:"     // role:<r> may hand role <r> to a spawned agent
)

// Errors the ledger functions wrap; callers branch on them with errors.Is.
var (
	ErrNotGranted = errors.New("actor not granted")
	ErrConflict   = errors.New("ledger row changed concurrently")
	ErrInvalidRow = errors.New("invalid ledger row")
)

// Row is one actor's grant.
type Row struct {
	Actor          string    `json:"actor"`          // protocol.ValidActor
	Subjects       []string  `json:"subjects"`       // IdP subjects allowed to act as the actor; at least one
	Role           string    `json:"role,omitempty"` // anycast role, a protocol token
	AllowSubscribe []string  `json:"allowSubscribe"` // channel patterns it may read
	AllowPublish   []string  `json:"allowPublish"`   // channel patterns it may post to
	Scopes         []string  `json:"scopes"`         // spawn, admin, supervise, role:<r>
	Label          string    `json:"label,omitempty"`
	Revision       uint64    `json:"revision"`  // the row's generation: 1 when first granted, +1 per change
	UpdatedAt      time.Time `json:"updatedAt"` // when the row was last written
}

// Key is the KV key of the actor's row.
func Key(actor string) string { return keyPrefix + actor }

// Validate checks a row as Grant would store it. Errors wrap ErrInvalidRow.
func (r Row) Validate() error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRow, err)
	}
	return nil
}

func (r Row) validate() error {
	if !protocol.ValidActor(r.Actor) {
		return fmt.Errorf("actor %q: use 1 to %d letters, digits and _", r.Actor, protocol.MaxActorLength)
	}
	if len(r.Subjects) == 0 {
		return errors.New("no subject: name the IdP subject allowed to act as the actor")
	}
	for _, s := range r.Subjects {
		if err := CheckSubject(s); err != nil {
			return err
		}
	}
	if r.Role != "" {
		if err := protocol.CheckRole(r.Role); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		what string
		pats []string
	}{{"allowSubscribe", r.AllowSubscribe}, {"allowPublish", r.AllowPublish}} {
		for _, p := range l.pats {
			if err := protocol.CheckChannelPattern(p); err != nil {
				return fmt.Errorf("%s: %w", l.what, err)
			}
		}
	}
	for _, s := range r.Scopes {
		if err := CheckScope(s); err != nil {
			return err
		}
	}
	if len(r.Scopes)+len(r.AllowSubscribe)+len(r.AllowPublish) == 0 {
		return errors.New("the row grants nothing: give a scope, a channel to subscribe to, or one to publish to")
	}
	if len(r.Label) > MaxLabelLength || strings.IndexFunc(r.Label, unicode.IsControl) >= 0 {
		return fmt.Errorf("label: at most %d bytes without control characters", MaxLabelLength)
	}
	return nil
}

// CheckSubject validates an IdP subject: 1 to 255 bytes, no control characters.
func CheckSubject(s string) error {
	if s == "" || len(s) > MaxSubjectLength || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("subject %q: want 1 to %d bytes without control characters", s, MaxSubjectLength)
	}
	return nil
}

// CheckScope validates one scope: spawn, admin, supervise or role:<r> with r a token.
func CheckScope(s string) error {
	switch s {
	case ScopeSpawn, ScopeAdmin, ScopeSupervise:
		return nil
	}
	if r, ok := strings.CutPrefix(s, ScopeRolePrefix); ok && protocol.ValidToken(r) {
		return nil
	}
	return fmt.Errorf("scope %q: want spawn, admin, supervise or role:<role>", s)
}

// Lookup reads the actor's row. A missing or deleted row is ErrNotGranted; a row that does
// not decode or validate wraps ErrInvalidRow (fail closed).
func Lookup(ctx context.Context, kv jetstream.KeyValue, actor string) (Row, error) {
	r, _, err := lookup(ctx, kv, actor)
	return r, err
}

// lookup also returns the KV revision of the entry, the token of the CAS write.
func lookup(ctx context.Context, kv jetstream.KeyValue, actor string) (Row, uint64, error) {
	if !protocol.ValidActor(actor) {
		return Row{}, 0, fmt.Errorf("ledger lookup %q: %w: actor is not a valid token", actor, ErrNotGranted)
	}
	e, err := kv.Get(ctx, Key(actor))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Row{}, 0, fmt.Errorf("ledger lookup %s: %w", actor, ErrNotGranted)
	}
	if err != nil {
		return Row{}, 0, fmt.Errorf("ledger lookup %s: %w", actor, err)
	}
	r, err := decode(e.Value())
	if err == nil && r.Actor != actor {
		err = fmt.Errorf("%w: row names actor %q", ErrInvalidRow, r.Actor)
	}
	if err != nil { // the revision still lets a caller replace or delete the broken row
		return Row{}, e.Revision(), fmt.Errorf("ledger lookup %s: %w", actor, err)
	}
	return r, e.Revision(), nil
}

func decode(b []byte) (Row, error) {
	var r Row
	if err := json.Unmarshal(b, &r); err != nil {
		return Row{}, fmt.Errorf("%w: %w", ErrInvalidRow, err)
	}
	if err := r.Validate(); err != nil {
		return Row{}, err
	}
	return r, nil
}

// Grant stores row, replacing the whole existing row. row.Revision is the revision the
// caller read: 0 when the actor is not granted yet. If the stored row is at another
// revision (someone changed it since), nothing is written and the error wraps ErrConflict.
// It returns the stored row, with its new Revision and UpdatedAt. Subjects and scopes are
// stored sorted and without duplicates.
func Grant(ctx context.Context, kv jetstream.KeyValue, row Row) (Row, error) {
	row.Subjects = sortedSet(row.Subjects)
	row.Scopes = sortedSet(row.Scopes)
	row.AllowSubscribe = sortedSet(row.AllowSubscribe)
	row.AllowPublish = sortedSet(row.AllowPublish)
	if err := row.Validate(); err != nil {
		return Row{}, fmt.Errorf("ledger grant %s: %w", row.Actor, err)
	}
	cur, kvRev, err := lookup(ctx, kv, row.Actor)
	switch {
	case errors.Is(err, ErrNotGranted):
	case errors.Is(err, ErrInvalidRow) && row.Revision == 0:
		// A broken row is replaced only by a grant that knowingly starts over.
	case err != nil:
		return Row{}, fmt.Errorf("ledger grant %s: %w", row.Actor, err)
	}
	if cur.Revision != row.Revision {
		return Row{}, fmt.Errorf("ledger grant %s: %w: stored revision %d, the grant was based on %d", row.Actor, ErrConflict, cur.Revision, row.Revision)
	}
	row.Revision = cur.Revision + 1
	row.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := write(ctx, kv, row, kvRev); err != nil {
		return Row{}, fmt.Errorf("ledger grant %s: %w", row.Actor, err)
	}
	return row, nil
}

// write stores row if the key is still at kvRev (0: absent or deleted).
func write(ctx context.Context, kv jetstream.KeyValue, row Row, kvRev uint64) error {
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if kvRev == 0 {
		_, err = kv.Create(ctx, Key(row.Actor), b)
	} else {
		_, err = kv.Update(ctx, Key(row.Actor), b, kvRev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// revokeAttempts bounds Revoke's retries when the row changes under it.
const revokeAttempts = 5

// Revoke removes a grant. With subject "" it deletes the actor's row; otherwise it removes
// only that subject, and deletes the row when no subject is left. A missing row, or a subject
// the row does not list, is ErrNotGranted. It returns the row as left (zero when deleted).
func Revoke(ctx context.Context, kv jetstream.KeyValue, actor, subject string) (Row, error) {
	for range revokeAttempts {
		row, err := revoke(ctx, kv, actor, subject)
		if !errors.Is(err, ErrConflict) {
			return row, err
		}
	}
	return Row{}, fmt.Errorf("ledger revoke %s: %w: gave up after %d attempts", actor, ErrConflict, revokeAttempts)
}

func revoke(ctx context.Context, kv jetstream.KeyValue, actor, subject string) (Row, error) {
	cur, kvRev, err := lookup(ctx, kv, actor)
	if errors.Is(err, ErrInvalidRow) && subject == "" {
		err = nil // a broken row can still be deleted
	}
	if err != nil {
		return Row{}, fmt.Errorf("ledger revoke: %w", err)
	}
	if subject != "" {
		i := slices.Index(cur.Subjects, subject)
		if i < 0 {
			return Row{}, fmt.Errorf("ledger revoke %s: subject %q: %w", actor, subject, ErrNotGranted)
		}
		if len(cur.Subjects) > 1 {
			cur.Subjects = slices.Delete(cur.Subjects, i, i+1)
			cur.Revision++
			cur.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
			if err := write(ctx, kv, cur, kvRev); err != nil {
				return Row{}, fmt.Errorf("ledger revoke %s: %w", actor, err)
			}
			return cur, nil
		}
	}
	err = kv.Delete(ctx, Key(actor), jetstream.LastRevision(kvRev))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return Row{}, fmt.Errorf("ledger revoke %s: %w: %w", actor, ErrConflict, err)
	}
	if err != nil {
		return Row{}, fmt.Errorf("ledger revoke %s: delete: %w", actor, err)
	}
	return Row{}, nil
}

// List returns every granted row, sorted by actor. A row that does not decode fails the
// whole list (ErrInvalidRow), so a broken ledger is seen, not skipped.
func List(ctx context.Context, kv jetstream.KeyValue) ([]Row, error) {
	keys, err := kv.ListKeysFiltered(ctx, keyPrefix+">")
	if err != nil {
		return nil, fmt.Errorf("ledger list: %w", err)
	}
	var actors []string
	for k := range keys.Keys() {
		actors = append(actors, strings.TrimPrefix(k, keyPrefix))
	}
	if err := ctx.Err(); err != nil { // the lister closes early when ctx ends
		return nil, fmt.Errorf("ledger list: %w", err)
	}
	slices.Sort(actors)
	rows := make([]Row, 0, len(actors))
	for _, a := range actors {
		r, err := Lookup(ctx, kv, a)
		if errors.Is(err, ErrNotGranted) {
			continue // revoked since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("ledger list: %w", err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// sortedSet returns s sorted without duplicates; nil stays nil, as an empty list.
func sortedSet(s []string) []string {
	if len(s) == 0 {
		return []string{}
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
