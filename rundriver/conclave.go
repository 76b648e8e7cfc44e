package rundriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// A conclave (LANG §7.5) is a scope and an effect with one journal entry: opening it
// names a channel and writes its members' durable membership rows (cotal_members_<s>), so
// the seats read each other's posts there; its body runs as branch "in" with the handle
// {channel}; closing it tombstones the rows it wrote and deletes the registry row of a
// channel it minted. The entry's `closed` fact says whether the membership was released
// by the close: true when it settles ok or failed after a close, false when the conclave
// was cancelled (a race's loser, whose rows the driver releases on its way out). A pending
// entry is a close still owed.
//
// Recovery is by the plan: the channel, whether this conclave minted its registry row,
// and per member its principal, incarnation, generation and whether this conclave wrote
// its row are decided first and bound on the pending entry (its external state) before
// any row is written. A resumed driver re-enters with the recorded plan, never resolving
// the members again: it writes only the rows the plan's generation says are missing and
// releases exactly what the plan wrote.

// conclavePlan is the external state a conclave binds before it writes (the reference's
// ConclavePlan).
type conclavePlan struct {
	Channel    string           `json:"channel"`
	Registered bool             `json:"registered"` // the conclave minted the channel's registry row
	Members    []conclaveMember `json:"members"`
}

type conclaveMember struct {
	Agent      string `json:"agent"`
	Principal  string `json:"principal"`
	UID        string `json:"uid"`
	Generation uint64 `json:"generation"`
	Joined     bool   `json:"joined"` // this conclave writes (and releases) the row
}

// conclaveRegistryRow is the channel registry row a conclave mints for a derived channel.
type conclaveRegistryRow struct {
	Description string `json:"description"`
}

// maxPresenceScan bounds the presence rows read to resolve a conclave's members.
const maxPresenceScan = 10000

// ConclaveChannel is the channel a conclave whose program names none opens: "conclave-"
// and the first 12 hex of SHA-256 of the step's request id, so a resumed run re-derives
// the same room.
func ConclaveChannel(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "conclave-" + hex.EncodeToString(sum[:])[:12]
}

// conclave opens the conclave of entry e (or re-enters the plan it bound), runs its body
// and closes it, settling the entry as the reference records it.
func (d *drive) conclave(ctx context.Context, c lang.Call, e runstore.Entry, body func(ctx context.Context, opened any) (lang.Result, error)) (lang.Result, error) {
	var plan conclavePlan
	if len(e.External) == 0 || json.Unmarshal(e.External, &plan) != nil || plan.Channel == "" {
		p, err := d.planConclave(ctx, c, e)
		if err != nil {
			var fail *lang.EffectError
			if errors.As(err, &fail) {
				// Nothing was written: the open failed before its plan was bound.
				if serr := d.settle(ctx, e, "failed", nil, fail, d.cfg.now()); serr != nil {
					return lang.Result{}, serr
				}
			}
			return lang.Result{}, err
		}
		plan = p
		b, err := json.Marshal(plan)
		if err != nil {
			return lang.Result{}, fmt.Errorf("conclave %s: plan: %w", c.Key, err)
		}
		e.External = b
		if e, err = d.append(ctx, e); err != nil {
			return lang.Result{}, err
		}
	}
	if err := d.openConclave(ctx, plan); err != nil {
		return lang.Result{}, fmt.Errorf("conclave %s: open %s: %w", c.Key, plan.Channel, err)
	}
	res, err := body(ctx, map[string]any{"channel": plan.Channel})
	if err != nil && d.runCtx.Err() != nil {
		// The driver stops (killed, released, superseded): the entry stays pending with
		// its plan, and the resume that takes the run over closes the conclave.
		return lang.Result{}, err
	}
	// From here on the release is owed whatever ended the body: a cancelled branch's
	// context must not stop it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// A cancelled body may answer no error at all: its branch "in" is then a loser.
	if errors.Is(err, lang.ErrCancelled) || slices.Contains(res.Losers, "in") || (err != nil && ctx.Err() != nil) {
		// A cancelled conclave does not close itself (LANG §7.6): the driver releases what
		// it wrote, and the entry records cancelled with the closed fact false.
		if rerr := d.releaseConclave(cctx, plan); rerr != nil {
			d.log.Warn("conclave release", "run", d.run, "step", c.Key, "err", rerr)
		}
		e.Closed = json.RawMessage("false")
		if serr := d.settle(cctx, e, "cancelled", nil, nil, d.cfg.now()); serr != nil {
			return lang.Result{}, serr
		}
		return lang.Result{}, lang.ErrCancelled
	}
	if rerr := d.releaseConclave(cctx, plan); rerr != nil {
		// The close did not land: the entry stays pending, a close still owed that a
		// resume retries.
		return lang.Result{}, fmt.Errorf("conclave %s: close %s: %w", c.Key, plan.Channel, rerr)
	}
	e.Closed = json.RawMessage("true")
	var fail *lang.EffectError
	var fault *lang.Fault
	switch {
	case errors.As(err, &fault):
		// A fault the program may catch (a library call refused): recorded as the
		// failure it is, its code and message kept.
		fail = &lang.EffectError{Code: fault.Code, Kind: "fault", Message: fault.Message}
		fallthrough
	case errors.As(err, &fail):
		if serr := d.settle(cctx, e, "failed", nil, fail, d.cfg.now()); serr != nil {
			return lang.Result{}, serr
		}
		return lang.Result{}, err
	case err != nil:
		// A value the program threw: the room is closed, and the entry stays pending as
		// every scope's does for a thrown value, replayed by running the body again.
		return lang.Result{}, err
	}
	end := max(res.EndedAt, e.StartedAt)
	if err := d.settle(cctx, e, "ok", res.Value, nil, end); err != nil {
		return lang.Result{}, err
	}
	res.EndedAt = end
	return res, nil
}

// planConclave decides the conclave's plan from the world: the channel (the program's,
// which must be concrete, else derived from the request id), each member handle resolved
// to the one presence row of its name (and incarnation, when the handle carries one), and
// each member's existing row, so its generation and whether this conclave writes it are
// fixed before anything is written. Duplicate handles collapse to one member.
func (d *drive) planConclave(ctx context.Context, c lang.Call, e runstore.Entry) (conclavePlan, error) {
	subject, _ := c.Input["subject"].(map[string]any)
	plan := conclavePlan{Members: []conclaveMember{}}
	if ch, ok := subject["channel"].(string); ok {
		if err := protocol.CheckConcreteChannel(ch); err != nil {
			return plan, &lang.EffectError{Code: "L4000", Kind: "handler-fault",
				Message: fmt.Sprintf("conclave channel %q: a conclave joins its members to one concrete channel: %v", ch, err)}
		}
		plan.Channel = ch
	} else {
		plan.Channel, plan.Registered = ConclaveChannel(e.RequestID), true
	}
	handles, _ := subject["members"].([]any)
	if len(handles) == 0 {
		return plan, nil
	}
	presence, err := d.presence(ctx)
	if err != nil {
		return plan, err
	}
	members := d.members()
	seen := map[string]bool{}
	for _, h := range handles {
		agent, _ := h.(string)
		p, uid, err := resolveMember(presence, agent)
		if err != nil {
			return plan, err
		}
		if seen[p.String()+"."+uid] {
			continue
		}
		seen[p.String()+"."+uid] = true
		m := conclaveMember{Agent: agent, Principal: p.String(), UID: uid, Generation: 1, Joined: true}
		row, _, err := readMembership(ctx, members, protocol.MembershipKey(plan.Channel, p, uid))
		if err != nil {
			return plan, err
		}
		switch {
		case row != nil && row.Active():
			m.Generation, m.Joined = row.Generation, false // a resident: not the conclave's to join or evict
		case row != nil:
			m.Generation = row.Generation + 1
		}
		plan.Members = append(plan.Members, m)
	}
	return plan, nil
}

// presence reads the space's presence rows by Direct Get (no consumer), keyed by principal.
func (d *drive) presence(ctx context.Context) (map[string]protocol.Presence, error) {
	recs, err := client.ScanBucket(ctx, d.cfg.JS.Conn(), protocol.BucketPresence(d.cfg.Space), ">", maxPresenceScan)
	if err != nil {
		return nil, fmt.Errorf("conclave: read presence: %w", err)
	}
	out := map[string]protocol.Presence{}
	for _, r := range recs {
		if r.Op != jetstream.KeyValuePut {
			continue
		}
		if p, err := protocol.DecodePresence(r.Key, r.Value); err == nil {
			out[r.Key] = p
		}
	}
	return out, nil
}

// resolveMember answers the principal and incarnation of the one present agent a handle
// names: "<name>#<lifecycleUid>" (the reference's handle) or a bare name (a Go seat's).
// None is the effect's own catchable failure (L4002: the agent is down or gone).
func resolveMember(presence map[string]protocol.Presence, agent string) (protocol.Principal, string, error) {
	name, uid := agent, ""
	if i := strings.LastIndexByte(agent, '#'); i > 0 && i < len(agent)-1 {
		name, uid = agent[:i], agent[i+1:]
	}
	var found []protocol.Presence
	for _, p := range presence {
		if p.Card.Name != name || p.Status == protocol.StatusOffline || !protocol.ValidLifecycleUID(p.LifecycleUID) {
			continue
		}
		if uid != "" && p.LifecycleUID != uid {
			continue
		}
		found = append(found, p)
	}
	switch len(found) {
	case 0:
		return protocol.Principal{}, "", &lang.EffectError{Code: "L4002", Kind: "conclave",
			Message: fmt.Sprintf("conclave member %q is not present on the mesh: no presence row carries that name and incarnation, so the agent is down or gone", agent)}
	case 1:
	default:
		return protocol.Principal{}, "", &lang.EffectError{Code: "L4000", Kind: "handler-fault",
			Message: fmt.Sprintf("conclave member %q is ambiguous: %d presence rows claim that name", agent, len(found))}
	}
	p, err := protocol.ParsePrincipal(found[0].Card.ID)
	if err != nil {
		return protocol.Principal{}, "", fmt.Errorf("conclave member %q: %w", agent, err)
	}
	return p, found[0].LifecycleUID, nil
}

// openConclave executes a plan, idempotently: the minted channel's registry row is
// written, and each member the plan joins gets its row at the plan's generation unless a
// row of that generation or a newer one is there already (a re-entry must not move a
// landed row's join cursor; a newer row is the member's own).
func (d *drive) openConclave(ctx context.Context, plan conclavePlan) error {
	if plan.Registered {
		kv, err := d.cfg.JS.KeyValue(ctx, protocol.BucketChannels(d.cfg.Space))
		if err != nil {
			return fmt.Errorf("channel registry: %w", err)
		}
		b, _ := json.Marshal(conclaveRegistryRow{Description: "a workflow conclave of run " + d.run})
		if _, err := kv.Put(ctx, plan.Channel, b); err != nil {
			return fmt.Errorf("channel registry row %s: %w", plan.Channel, err)
		}
	}
	var joins []conclaveMember
	for _, m := range plan.Members {
		if m.Joined {
			joins = append(joins, m)
		}
	}
	if len(joins) == 0 {
		return nil
	}
	kv := d.members()
	cursor, err := d.chatLast(ctx)
	if err != nil {
		return err
	}
	for _, m := range joins {
		p, err := protocol.ParsePrincipal(m.Principal)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Agent, err)
		}
		key := protocol.MembershipKey(plan.Channel, p, m.UID)
		row, rev, err := readMembership(ctx, kv, key)
		if err != nil {
			return err
		}
		if row != nil && row.Generation >= m.Generation {
			continue
		}
		activated := true
		nrow := protocol.Membership{Channel: plan.Channel, Owner: m.Principal, UID: m.UID, State: protocol.MembershipActive,
			JoinCursor: cursor, Activated: &activated, Generation: m.Generation, Writer: d.writer(), UpdatedAt: d.cfg.now()}
		if err := writeMembership(ctx, kv, key, nrow, rev); err != nil {
			// A concurrent write won: a row of this generation or newer is there now
			// (the member's own), which is as good as this one.
			if cur, _, rerr := readMembership(ctx, kv, key); rerr == nil && cur != nil && cur.Generation >= m.Generation {
				continue
			}
			return err
		}
	}
	return nil
}

// releaseConclave tombstones the rows the plan wrote (at CHAT's last sequence, unless a
// member's row moved on to a newer generation of its own or is left already) and deletes
// the registry row of a channel the conclave minted. Running it again changes nothing.
func (d *drive) releaseConclave(ctx context.Context, plan conclavePlan) error {
	var joined []conclaveMember
	for _, m := range plan.Members {
		if m.Joined {
			joined = append(joined, m)
		}
	}
	if len(joined) > 0 {
		kv := d.members()
		cursor, err := d.chatLast(ctx)
		if err != nil {
			return err
		}
		for _, m := range joined {
			p, err := protocol.ParsePrincipal(m.Principal)
			if err != nil {
				return fmt.Errorf("member %s: %w", m.Agent, err)
			}
			key := protocol.MembershipKey(plan.Channel, p, m.UID)
			row, rev, err := readMembership(ctx, kv, key)
			if err != nil {
				return err
			}
			if row == nil || row.Generation != m.Generation || !row.Active() {
				continue // never landed, the member's own newer row, or left already
			}
			at := max(cursor, row.JoinCursor)
			row.State, row.LeaveCursor = protocol.MembershipLeft, &at
			row.Writer, row.UpdatedAt = d.writer(), d.cfg.now()
			if err := writeMembership(ctx, kv, key, *row, rev); err != nil {
				// A concurrent write won: the member left or rejoined on its own.
				if cur, _, rerr := readMembership(ctx, kv, key); rerr == nil && (cur == nil || cur.Generation != m.Generation || !cur.Active()) {
					continue
				}
				return err
			}
		}
	}
	if plan.Registered {
		kv, err := d.cfg.JS.KeyValue(ctx, protocol.BucketChannels(d.cfg.Space))
		if err != nil {
			return fmt.Errorf("channel registry: %w", err)
		}
		if err := kv.Delete(ctx, plan.Channel); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("channel registry row %s: %w", plan.Channel, err)
		}
	}
	return nil
}

// writer is the writer identity a conclave's rows carry: the run's caller principal.
func (d *drive) writer() string { return protocol.OwnerLocal + "." + RunCaller(d.run) }

// chatLast is CHAT's last sequence now: a join or leave cursor.
func (d *drive) chatLast(ctx context.Context) (uint64, error) {
	s, err := d.cfg.JS.Stream(ctx, protocol.StreamChat(d.cfg.Space))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", protocol.StreamChat(d.cfg.Space), err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// membersBucket reads and writes rows of cotal_members_<s> by their subjects alone (a
// batch Direct Get to read, a publish with the expected last sequence to write), so the
// run host needs no stream info grant on the bucket: its permissions stay small.
type membersBucket struct {
	js     jetstream.JetStream
	bucket string
}

func (d *drive) members() membersBucket {
	return membersBucket{js: d.cfg.JS, bucket: protocol.BucketMembers(d.cfg.Space)}
}

// readMembership reads one membership row and its revision (0 when the key was never
// written); the row is nil when there is none.
func readMembership(ctx context.Context, kv membersBucket, key string) (*protocol.Membership, uint64, error) {
	recs, err := client.ScanBucket(ctx, kv.js.Conn(), kv.bucket, key, 1)
	if err != nil {
		return nil, 0, fmt.Errorf("read membership %s: %w", key, err)
	}
	if len(recs) == 0 {
		return nil, 0, nil
	}
	if recs[0].Op != jetstream.KeyValuePut {
		return nil, recs[0].Seq, nil
	}
	row, err := protocol.DecodeMembership(recs[0].Value)
	if err != nil {
		return nil, recs[0].Seq, nil // unreadable: replaced
	}
	return &row, recs[0].Seq, nil
}

// writeMembership stores row at key if the key's revision is still rev (0: never written).
func writeMembership(ctx context.Context, kv membersBucket, key string, row protocol.Membership, rev uint64) error {
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("membership %s: %w", key, err)
	}
	if _, err := kv.js.Publish(ctx, "$KV."+kv.bucket+"."+key, b, jetstream.WithExpectLastSequencePerSubject(rev)); err != nil {
		return fmt.Errorf("write membership %s: %w", key, err)
	}
	return nil
}
