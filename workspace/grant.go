package workspace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// Grant is what an agent may do itself, as its persona says: the channels it may read (its
// read ACL), post to, its capabilities and the role it serves. An agent that defines or
// spawns a persona may not hand it more than its own grant.
type Grant struct {
	Read         []string
	Publish      []string
	Capabilities []string
	Role         string // the role it serves itself, "" for none
}

// GrantOf is the grant of persona per.
func GrantOf(per *Persona) Grant {
	return Grant{Read: per.ReadACL(), Publish: per.AllowPublish, Capabilities: per.Capabilities, Role: per.Role}
}

// MayGrantRole reports whether g may hand role r to a persona: the role it serves itself,
// or one its capability role:<r> names.
func (g Grant) MayGrantRole(r string) bool {
	return r == "" || r == g.Role || slices.Contains(g.Capabilities, "role:"+r)
}

// Covers refuses a persona that may read, post or do more than g, or serves a role g may
// not hand out (its anycast queue is work meant for that role), naming the first excess.
func (g Grant) Covers(per *Persona) error {
	if !g.MayGrantRole(per.Role) {
		return fmt.Errorf("it would serve role %q, which you may not hand out (you serve %s; the capability role:%s lets you)", per.Role, orNothing(nonEmpty(g.Role)), per.Role)
	}
	for _, ch := range per.ReadACL() {
		if !protocol.ChannelCovered(g.Read, ch) {
			return fmt.Errorf("it would read %q, which you may not read yourself (you read %s)", ch, orNothing(g.Read))
		}
	}
	for _, ch := range per.AllowPublish {
		if !protocol.ChannelCovered(g.Publish, ch) {
			return fmt.Errorf("it would post to %q, where you may not post yourself (you post to %s)", ch, orNothing(g.Publish))
		}
	}
	for _, c := range per.Capabilities {
		if !slices.Contains(g.Capabilities, c) {
			return fmt.Errorf("it would have capability %q, which you do not have (yours: %s)", c, orNothing(g.Capabilities))
		}
	}
	return nil
}

func orNothing(l []string) string {
	if len(l) == 0 {
		return "nothing"
	}
	return strings.Join(l, ", ")
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
