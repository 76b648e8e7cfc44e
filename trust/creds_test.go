package trust

import "testing"

func TestMaySubscribe(t *testing.T) {
	c := Creds{SubAllow: []string{"cotal.s.chat.*.*.general", "cotal.s.chat.*.*.team.>", "_INBOX_x.>"}, SubDeny: []string{"cotal.s.chat.*.*.team.secret"}}
	for sub, want := range map[string]bool{
		"cotal.s.chat.*.*.general":     true,
		"cotal.s.chat.*.*.ops":         false,
		"cotal.s.chat.*.*.team.a":      true,
		"cotal.s.chat.*.*.team.>":      false, // overlaps the denied team.secret
		"cotal.s.chat.*.*.team.secret": false,
		"cotal.s.chat.*.*.team":        false,
		"cotal.s.chat.>":               false,
	} {
		if got := c.MaySubscribe(sub); got != want {
			t.Errorf("MaySubscribe(%q) = %v, want %v", sub, got, want)
		}
	}
	if !(Creds{}).MaySubscribe("anything.at.all") {
		t.Error("no subscribe permissions: want everything allowed")
	}
	wide := Creds{SubAllow: []string{">"}}
	if !wide.MaySubscribe("cotal.s.chat.*.*.general") {
		t.Error("allow >: want general allowed")
	}
}
