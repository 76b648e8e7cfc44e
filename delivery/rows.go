package delivery

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// Decoded rows of the three buckets the daemon decides from, and their snapshots.

// channelRow is the part of a channel registry entry (or the "=defaults" entry) the daemon
// reads: the delivery class.
type channelRow struct {
	DeliveryClass string `json:"deliveryClass,omitempty"`
}

func decodeChannel(b []byte) (channelRow, error) {
	var r channelRow
	err := json.Unmarshal(b, &r)
	return r, err
}

// classes is a snapshot of the channel registry.
type classes struct {
	own map[string]string // concrete channel -> its own class
	def string            // "=defaults", or "" for the built-in default
}

func buildClasses(rows map[string]channelRow) classes {
	c := classes{own: map[string]string{}}
	for k, r := range rows {
		if k == protocol.ChannelDefaultsKey {
			c.def = r.DeliveryClass
		} else if r.DeliveryClass != "" {
			c.own[k] = r.DeliveryClass
		}
	}
	return c
}

// class is the effective delivery class of a concrete channel (wire-protocol §7.1):
// its own, else the space default, else durable.
func (c classes) class(ch string) string {
	if k := c.own[ch]; k != "" {
		return k
	}
	return provision.Defaults{DeliveryClass: c.def}.EffectiveDeliveryClass()
}

// memberRow is one decoded membership row and the member it names.
type memberRow struct {
	protocol.Membership
	m       member
	pattern bool // the channel holds * or >
}

func decodeMembership(b []byte) (memberRow, error) {
	var r memberRow
	var err error
	if r.Membership, err = protocol.DecodeMembership(b); err != nil {
		return r, err
	}
	p, err := protocol.ParsePrincipal(r.Owner)
	if err != nil {
		return r, err
	}
	if !protocol.ValidLifecycleUID(r.UID) {
		return r, fmt.Errorf("lifecycle uid %q", r.UID)
	}
	if err := protocol.CheckChannelPattern(r.Channel); err != nil {
		return r, err
	}
	r.m = member{p: p, uid: r.UID}
	r.pattern = protocol.CheckConcreteChannel(r.Channel) != nil
	return r, nil
}

// roster is a snapshot of the members bucket.
type roster struct {
	concrete map[string][]memberRow // by channel
	patterns []memberRow
	byMember map[string][]memberRow // by member key
}

func buildRoster(rows map[string]memberRow) roster {
	r := roster{concrete: map[string][]memberRow{}, byMember: map[string][]memberRow{}}
	for _, row := range rows {
		if row.pattern {
			r.patterns = append(r.patterns, row)
		} else {
			r.concrete[row.Channel] = append(r.concrete[row.Channel], row)
		}
		r.byMember[row.m.key()] = append(r.byMember[row.m.key()], row)
	}
	return r
}

// rows calls f for every row whose channel pattern matches the concrete channel ch.
func (r roster) rows(ch string, f func(memberRow)) {
	for _, row := range r.concrete[ch] {
		f(row)
	}
	for _, row := range r.patterns {
		if protocol.ChannelMatches(row.Channel, ch) {
			f(row)
		}
	}
}

// aclDecoder decodes the ACL rows of space (decodeACL).
func aclDecoder(space string) func([]byte) (*ACL, error) {
	return func(b []byte) (*ACL, error) { return decodeACL(space, b) }
}

// acls is a snapshot of the ACL bucket, with the names @mentions may use.
type acls struct {
	byMember    map[string]*ACL
	byPrincipal map[protocol.Principal][]member // the live rows of an alias
	byName      map[string][]member             // lower-cased actor
}

func buildACLs(rows map[string]*ACL) acls {
	a := acls{byMember: make(map[string]*ACL, len(rows)), byPrincipal: map[protocol.Principal][]member{}, byName: map[string][]member{}}
	for k, row := range rows {
		m, ok := parseMemberKey(k)
		if !ok || row == nil {
			continue
		}
		a.byMember[k] = row
		a.byPrincipal[m.p] = append(a.byPrincipal[m.p], m)
		n := strings.ToLower(m.p.Actor)
		a.byName[n] = append(a.byName[n], m)
	}
	return a
}
