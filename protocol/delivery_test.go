package protocol

import "testing"

func TestDeliveryNames(t *testing.T) {
	bob := Principal{Owner: OwnerLocal, Actor: "bob"}
	uid := "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for got, want := range map[string]string{
		DLVSubject("s", bob, uid):                     "cotal.s.dlv.local.bob." + uid,
		ConsumerDLV(bob, uid):                         "dlv_local-bob-" + uid,
		CtlSubject("s", ServiceDelivery, bob):         "cotal.s.ctl.delivery.local.bob",
		CtlFilter("s", ServiceDeliveryAdmin):          "cotal.s.ctl.delivery-admin.*.*",
		ReplyFilter(CtlSubject("s", "delivery", bob)): "cotal.s.ctl.delivery.local.bob.reply.*",
		MembershipKey("team.*.>", bob, uid):           "team.=.==/local.bob." + uid,
		MembershipKey("general", bob, uid):            "general/local.bob." + uid,
		string(SignedBytes("a.b", []byte("{}"))):      "a.b\n{}",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	req := CtlSubject("s", ServiceDelivery, bob)
	for reply, want := range map[string]bool{
		req + ".reply.n1":       true,
		req + ".reply.":         false,
		req + ".reply.n1.extra": false,
		req + ".reply.*":        false,
		"_INBOX.abc":            false,
		req + "x.reply.n1":      false,
	} {
		if got := IsReplyTo(req, reply); got != want {
			t.Errorf("IsReplyTo(%q) = %v", reply, got)
		}
	}
}
