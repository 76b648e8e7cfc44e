// Package a2apeer presents external A2A agents (Agent2Agent protocol v0.3: ADK,
// LangGraph, CrewAI or any service that serves an Agent Card and JSON-RPC) as peers of a
// space. The operator registers an agent (Registration, kept in the space's
// cotal_a2apeers_<space> bucket by Store, which only the project's own identity may
// read or write); the Bridge then joins the space as that agent, with its own identity,
// a presence card of harness "a2a" carrying the agent's skills, and its own DM durable,
// and turns each DM or anycast it receives into an A2A message/send call, acking the
// cotal message once the agent accepted it, and each answer back into a DM replying to
// the message that asked.
package a2apeer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Harness is the card meta "connector" of a presented agent: client.Peer.Harness reads
// it, so rosters say what runs the peer.
const Harness = "a2a"

// Registration is one external agent registered on a space: a row of the registry
// bucket, under its Name. Everything in it was checked (and its text made safe) when it
// was written; the bridge checks the URLs again before it calls them.
type Registration struct {
	Name            string           `json:"name"`                      // the peer's actor and display name in the space
	URL             string           `json:"url"`                       // the URL the operator registered
	CardURL         string           `json:"cardUrl"`                   // where the card was read
	Endpoint        string           `json:"endpoint"`                  // where the agent serves JSON-RPC
	Role            string           `json:"role,omitempty"`            // the anycast role it serves, if any
	AgentName       string           `json:"agentName,omitempty"`       // the name its card gives
	Description     string           `json:"description,omitempty"`     // its card's description
	Version         string           `json:"version,omitempty"`         // its card's version
	ProtocolVersion string           `json:"protocolVersion,omitempty"` // the A2A version its card names
	Streaming       bool             `json:"streaming,omitempty"`       // its card offers message/stream
	Skills          []protocol.Skill `json:"skills,omitempty"`          // its skills, as presence shows them
	Token           bool             `json:"token,omitempty"`           // calls carry a bearer token, kept on the operator's disk (never here)
	Added           int64            `json:"added"`                     // when it was registered, unix ms
}

// FromCard is the registration of the agent registered as name at raw, whose card c was
// read from cardURL.
func FromCard(name, raw string, cardURL string, c *Card, role string, token bool, now time.Time) (Registration, error) {
	ep, err := c.Endpoint()
	if err != nil {
		return Registration{}, err
	}
	r := Registration{Name: name, URL: raw, CardURL: cardURL, Endpoint: ep, Role: role,
		AgentName: safe(c.Name, protocol.MaxNameLength), Description: safe(c.Description, maxDescription),
		Version: safe(c.Version, maxVersion), ProtocolVersion: safe(c.ProtocolVersion, maxProtocolString),
		Streaming: c.Capabilities.Streaming, Skills: c.PeerSkills(), Token: token, Added: now.UnixMilli()}
	return r, r.Check()
}

// CheckName accepts the name of a registered agent: a valid actor token, since it is
// the peer's actor.
func CheckName(name string) error {
	if !protocol.ValidActor(name) {
		return fmt.Errorf("name %q: want 1 to %d letters, digits or _ (it becomes the peer's actor in the space)", name, protocol.MaxActorLength)
	}
	return nil
}

// Check validates a registration read from the bucket or about to be written.
func (r Registration) Check() error {
	if err := CheckName(r.Name); err != nil {
		return err
	}
	if r.Role != "" {
		if err := protocol.CheckRole(r.Role); err != nil {
			return fmt.Errorf("role: %w", err)
		}
	}
	for _, u := range []string{r.URL, r.CardURL, r.Endpoint} {
		if _, err := CheckURL(u); err != nil {
			return err
		}
	}
	if len(r.Skills) > MaxSkills {
		return fmt.Errorf("%d skills: at most %d", len(r.Skills), MaxSkills)
	}
	return nil
}

// Bucket names the registry bucket of space.
func Bucket(space string) string { return protocol.BucketA2APeers(space) }

// ErrNotFound reports a name with no registration.
var ErrNotFound = errors.New("no such A2A peer")

// ErrExists reports a name already registered.
var ErrExists = errors.New("an A2A peer of that name is registered")

// Store reads and writes a space's registry. Its JetStream context must be the project's
// own identity (the provisioner): no other profile may touch the bucket.
type Store struct {
	JS    jetstream.JetStream
	Space string
}

func (s *Store) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.JS.KeyValue(ctx, Bucket(s.Space))
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("a2a peers of space %q: the bucket %s does not exist yet: run `cotal up --space %s` to add it", s.Space, Bucket(s.Space), s.Space)
		}
		return nil, fmt.Errorf("a2a peers of space %q: %w", s.Space, err)
	}
	return kv, nil
}

// Put writes r, refusing (ErrExists) a name already registered unless replace.
func (s *Store) Put(ctx context.Context, r Registration, replace bool) error {
	if err := r.Check(); err != nil {
		return err
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode a2a peer %s: %w", r.Name, err)
	}
	if replace {
		_, err = kv.Put(ctx, r.Name, b)
	} else {
		_, err = kv.Create(ctx, r.Name, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: %s", ErrExists, r.Name)
		}
	}
	if err != nil {
		return fmt.Errorf("write a2a peer %s: %w", r.Name, err)
	}
	return nil
}

// Get reads the registration of name (ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, name string) (Registration, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return Registration{}, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Registration{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return Registration{}, fmt.Errorf("read a2a peer %s: %w", name, err)
	}
	return Decode(name, e.Value())
}

// Delete removes the registration of name (ErrNotFound when there is none) and the
// records of the tasks it had accepted and not answered, so an agent registered later
// under the name never inherits them. It answers how many task records went: their
// askers get no answer.
func (s *Store) Delete(ctx context.Context, name string) (int, error) {
	if _, err := s.Get(ctx, name); err != nil {
		return 0, err
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return 0, err
	}
	if err := kv.Delete(ctx, name); err != nil {
		return 0, fmt.Errorf("remove a2a peer %s: %w", name, err)
	}
	keys, err := kv.ListKeysFiltered(ctx, taskPrefix(name)+"*")
	if err != nil {
		return 0, fmt.Errorf("remove a2a peer %s: list its tasks: %w", name, err)
	}
	dropped := 0
	for k := range keys.Keys() {
		if err := kv.Delete(ctx, k); err != nil {
			return dropped, fmt.Errorf("remove a2a peer %s: task record %s: %w", name, k, err)
		}
		dropped++
	}
	return dropped, nil
}

// List returns every registration, by name; a row that does not decode is skipped.
func (s *Store) List(ctx context.Context) ([]Registration, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list a2a peers: %w", err)
	}
	var out []Registration
	for k := range keys.Keys() {
		if isTaskKey(k) {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // removed since it was listed
		}
		if r, err := Decode(k, e.Value()); err == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Decode parses the row stored under key and checks it; its name must be its key.
func Decode(key string, b []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(b, &r); err != nil {
		return Registration{}, fmt.Errorf("a2a peer %q: %w", key, err)
	}
	if r.Name != key {
		return Registration{}, fmt.Errorf("a2a peer %q: the row names %q", key, r.Name)
	}
	if err := r.Check(); err != nil {
		return Registration{}, fmt.Errorf("a2a peer %q: %w", key, err)
	}
	return r, nil
}
