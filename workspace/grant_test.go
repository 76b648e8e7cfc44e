package workspace

import (
	"strings"
	"testing"
)

func TestGrantCovers(t *testing.T) {
	lead := Grant{Read: []string{"team.>", "general"}, Publish: []string{"team.*"}, Capabilities: []string{"spawn"}}
	for _, tc := range []struct {
		name string
		per  Persona
		want string // "" covered; else a part of the refusal
	}{
		{"within", Persona{Subscribe: []string{"team.a"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.a"}, Capabilities: []string{"spawn"}}, ""},
		{"DM-only", Persona{AllowPublish: []string{"team.b"}}, ""},
		{"reads beyond", Persona{AllowSubscribe: []string{">"}}, `it would read ">"`},
		{"reads ops", Persona{Subscribe: []string{"ops"}}, `it would read "ops"`},
		{"posts wider", Persona{AllowPublish: []string{"team.>"}}, `it would post to "team.>"`},
		{"capability", Persona{Capabilities: []string{"run"}}, `capability "run"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lead.Covers(&tc.per)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
	if err := (Grant{}).Covers(&Persona{}); err != nil {
		t.Fatalf("an empty grant refuses a DM-only persona (no read set reads nothing): %v", err)
	}
	if err := (Grant{}).Covers(&Persona{Subscribe: []string{"general"}}); err == nil || !strings.Contains(err.Error(), "you read nothing") {
		t.Fatalf("an empty grant covers a read of general: %v", err)
	}
}

// A role's anycast queue is work meant for that role: a spawner hands out only its own
// role, or one its capability role:<r> names.
func TestGrantCoversRole(t *testing.T) {
	lead := &Persona{Name: "lead", Role: "lead", Subscribe: []string{"general"}, AllowPublish: []string{"general"}, Capabilities: []string{"spawn", "role:helper"}}
	g := GrantOf(lead)
	for _, c := range []struct {
		role string
		ok   bool
	}{{"", true}, {"lead", true}, {"helper", true}, {"reviewer", false}} {
		err := g.Covers(&Persona{Name: "x", Role: c.role, Subscribe: []string{"general"}})
		if (err == nil) != c.ok {
			t.Errorf("role %q: err %v, want ok %v", c.role, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `it would serve role "reviewer", which you may not hand out (you serve lead; the capability role:reviewer lets you)`) {
			t.Errorf("role %q: %v", c.role, err)
		}
	}
}
