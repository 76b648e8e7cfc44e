package trust

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

const (
	uidA = "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	uidB = "bbbbbbbbbbbbbbbbbbbbbbbbbb"
	uidC = "cccccccccccccccccccccccccc"
	uidX = "xxxxxxxxxxxxxxxxxxxxxxxxxx"
)

var (
	alice = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	bob   = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
)

// allowed evaluates a NATS permission the way the server does: a subject passes when the
// allow list is empty or one entry matches, and no deny entry matches.
func allowed(p jwt.Permission, subject string) bool {
	if len(p.Allow) > 0 && !slices.ContainsFunc(p.Allow, func(pat string) bool { return protocol.ChannelMatches(pat, subject) }) {
		return false
	}
	return !slices.ContainsFunc(p.Deny, func(pat string) bool { return protocol.ChannelMatches(pat, subject) })
}

func TestPermissions(t *testing.T) {
	acct := &Account{space: "s"}
	user := newUserKey(t)
	inbox := "_INBOX_" + user + ".abc"
	agent := UserSpec{Name: "alice", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA, Role: "reviewer",
		Subscribe: []string{"general"}, AllowSubscribe: []string{"general", "team.>"}, AllowPublish: []string{"general"}}
	quiet := UserSpec{Name: "quiet", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA, Subscribe: []string{"general"}}
	observer := UserSpec{Name: "console", Profile: ProfileObserver, Principal: alice, LifecycleUID: uidA}
	admin := UserSpec{Name: "web", Profile: ProfileAdmin, Principal: alice, LifecycleUID: uidA}
	prov := UserSpec{Name: "cotal up", Profile: ProfileProvisioner}

	hist := "chathist_local-alice-" + uidA
	pub, sub := true, false
	type row struct {
		isPub   bool
		subject string
		want    bool
	}
	cases := []struct {
		name string
		spec UserSpec
		rows []row
	}{
		{"agent", agent, []row{
			// the forge lock
			{pub, "cotal.s.chat.local.alice.general", true},
			{pub, "cotal.s.chat.local.bob.general", false},
			{pub, "cotal.s.chat.local.alice.random", false}, // default-deny posting
			{pub, "cotal.s.chat.local.alice.team.backend", false},
			{pub, "cotal.s.inst.local.bob.local.alice", true},
			{pub, "cotal.s.inst.local.alice.local.bob", false},
			{pub, "cotal.s.svc.reviewer.local.alice", true},
			{pub, "cotal.s.svc.reviewer.local.bob", false},
			{pub, "$KV.cotal_presence_s.local.alice", true},
			{pub, "$KV.cotal_presence_s.local.bob", false},
			{pub, "$KV.cotal_channels_s.general", false},
			// reading
			{sub, "cotal.s.chat.*.*.general", true},
			{sub, "cotal.s.chat.*.*.team.>", true},
			{sub, "cotal.s.chat.*.*.secret", false},
			{sub, "cotal.s.chat.>", false},
			{sub, "cotal.s.inst.local.alice.>", false}, // DMs only through the durable
			{sub, "cotal.s.inst.local.bob.>", false},
			{sub, "cotal.s.svc.reviewer.>", false},
			{sub, inbox, true},
			{sub, "_INBOX.abc", false},
			{sub, "_INBOX_" + newUserKey(t) + ".abc", false},
			// its durables: bind only
			{pub, "$JS.API.CONSUMER.INFO.DM_s.dm_local-alice-" + uidA, true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s.dm_local-alice-" + uidA, true},
			{pub, "$JS.ACK.DM_s.dm_local-alice-" + uidA + ".1.2.3.4.5", true},
			{pub, "$JS.API.CONSUMER.INFO.DM_s.dm_local-bob-" + uidB, false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s.dm_local-bob-" + uidB, false},
			{pub, "$JS.ACK.DM_s.dm_local-bob-" + uidB + ".1.2.3.4.5", false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s.dm_local-alice-" + uidA, false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s.dm_local-alice-" + uidA + ".cotal.s.inst.local.alice.>", false},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.DM_s.dm_local-alice-" + uidA, false},
			{pub, "$JS.API.CONSUMER.DELETE.DM_s.dm_local-alice-" + uidA, false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.TASK_s.svc_reviewer", true},
			{pub, "$JS.ACK.TASK_s.svc_reviewer.1.2.3.4.5", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.TASK_s.svc_other", false},
			{pub, "$JS.API.CONSUMER.CREATE.TASK_s.svc_reviewer", false},
			{pub, "cotal.s.dinbox.local.bob." + uidB, false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.INBOX_s.reader", false},
			// history: its one reader, with a filter inside the read ACL
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.*.*.general", true},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.*.*.team.backend", true},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.*.*.secret", false},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist, false}, // no filter: could read anything
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s.chathist_local-bob-" + uidB + ".cotal.s.chat.*.*.general", false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s." + hist, true},
			{pub, "$JS.API.CONSUMER.DELETE.CHAT_s." + hist, true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s.fanout", false},
			{pub, "$JS.API.CONSUMER.DELETE.CHAT_s.fanout", false},
			// the public buckets and stream info
			{pub, "$JS.API.INFO", true},
			{pub, "$JS.API.STREAM.INFO.CHAT_s", true},
			{pub, "$JS.API.STREAM.INFO.DM_s", false},
			{pub, "$JS.API.STREAM.INFO.KV_cotal_presence_s", true},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_presence_s.$KV.cotal_presence_s.local.bob", true},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_presence_s", true}, // batch: the whole bucket
			{sub, "$KV.cotal_presence_s.>", true},                 // presence changes, live
			{pub, "$JS.API.DIRECT.GET.KV_cotal_channels_s.$KV.cotal_channels_s.general", true},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_channels_s", true},
			// no consumer of any form on the public buckets (issue 12 items 9 and 10)
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s.x1", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s.x1.$KV.cotal_presence_s.>", false},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.KV_cotal_presence_s.x1", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_channels_s.x1.$KV.cotal_channels_s.>", false},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.KV_cotal_channels_s.x1", false},
			{pub, "$JS.API.CONSUMER.DELETE.KV_cotal_presence_s.x1", false},
			{pub, "$JS.FC.KV_cotal_presence_s.x1.1", false},
			{sub, "$KV.cotal_channels_s.>", false},
			// never
			{pub, "$JS.API.DIRECT.GET.CHAT_s", false},
			{pub, "$JS.API.DIRECT.GET.DM_s.cotal.s.inst.local.bob.local.carol", false},
			{pub, "$JS.API.STREAM.MSG.GET.DM_s", false},
			{pub, "$JS.API.STREAM.DELETE.CHAT_s", false},
			{pub, "$JS.API.STREAM.PURGE.KV_cotal_presence_s", false},
			{pub, "$JS.API.STREAM.CREATE.X", false},
			{pub, "_INBOX.abc", false},
			// the durable plane: its own rails and its own hand-off durable, bind-only
			{pub, "cotal.s.ctl.delivery.local.alice", true},
			{pub, "cotal.s.ctl.delivery.local.bob", false},
			{pub, "cotal.s.ctl.delivery-admin.local.alice", false},
			{sub, "cotal.s.ctl.delivery.local.alice.reply.n1", true},
			{sub, "cotal.s.ctl.delivery.local.bob.reply.n1", false},
			{pub, "cotal.s.live.delivery.local.alice", true},
			{sub, "cotal.s.live.delivery.local.alice.reply.n1", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DLV_s.dlv_local-alice-" + uidA, true},
			{pub, "$JS.ACK.DLV_s.dlv_local-alice-" + uidA + ".1.2.3.4.5", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DLV_s.dlv_local-bob-" + uidB, false},
			{pub, "$JS.API.CONSUMER.CREATE.DLV_s.dlv_local-alice-" + uidA + ".cotal.s.dlv.>", false},
			{pub, "cotal.s.dlv.local.alice." + uidA, false},
		}},
		{"agent without post ACL or role", quiet, []row{
			{pub, "cotal.s.chat.local.alice.general", false},
			{sub, "cotal.s.chat.*.*.general", true}, // the read ACL falls back to Subscribe
			{pub, "cotal.s.inst.local.bob.local.alice", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.TASK_s.svc_reviewer", false},
		}},
		{"observer", observer, []row{
			{sub, "cotal.s.chat.>", true},
			{sub, "cotal.s.inst.>", false},
			{sub, "cotal.s.inst.local.bob.>", false},
			{sub, "cotal.s.svc.>", false},
			{sub, inbox, true},
			{sub, "_INBOX.>", false},
			{pub, "cotal.s.chat.local.alice.general", false},
			{pub, "cotal.s.inst.local.bob.local.alice", false},
			{pub, "cotal.s.svc.reviewer.local.alice", false},
			{pub, "$KV.cotal_presence_s.local.alice", false},
			{pub, "$JS.API.STREAM.INFO.CHAT_s", true},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.>", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s." + hist, true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s.fanout", false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s." + hist, false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s.dm_local-bob-" + uidB, false},
			{pub, "$JS.API.STREAM.INFO.DM_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s.x1.$KV.cotal_presence_s.>", false},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.KV_cotal_channels_s.x1", false},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_presence_s", true},
			{sub, "$KV.cotal_presence_s.>", true},
			{pub, "$JS.API.DIRECT.GET.CHAT_s.cotal.s.chat.local.bob.general", false},
		}},
		{"admin", admin, []row{
			{sub, "cotal.s.chat.>", true},
			{sub, "cotal.s.inst.>", true},
			{sub, "cotal.s.svc.>", true},
			{pub, "cotal.s.chat.local.alice.general", false},
			{pub, "cotal.s.inst.local.bob.local.alice", false},
			{pub, "cotal.s.svc.reviewer.local.alice", false},
			{pub, "$KV.cotal_presence_s.local.alice", false},
			{pub, "$JS.API.STREAM.INFO.DM_s", true},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s." + hist + ".cotal.s.inst.local.bob.>", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s." + hist, true},
			{pub, "$JS.API.CONSUMER.DELETE.DM_s." + hist, true},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s", false},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.DM_s." + hist, false},
			{pub, "$JS.API.CONSUMER.DELETE.DM_s.dm_local-bob-" + uidB, false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s.dm_local-bob-" + uidB, false},
			{pub, "$JS.API.CONSUMER.CREATE.TASK_s.x", false},
			{pub, "$JS.API.STREAM.DELETE.DM_s", false},
			{pub, "$JS.API.DIRECT.GET.DM_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s.x1.$KV.cotal_presence_s.>", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_channels_s", false},
			{sub, "$KV.cotal_presence_s.>", true},
		}},
		{"admin without uid", UserSpec{Name: "web", Profile: ProfileAdmin, Principal: alice}, []row{
			{sub, "cotal.s.inst.>", true},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s." + hist + ".cotal.s.inst.>", false},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.>", false},
		}},
		{"delivery", UserSpec{Name: "cotal deliver", Profile: ProfileDelivery, Principal: protocol.Principal{Owner: "local", Actor: "cotal_delivery"}}, []row{
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s.fanout.cotal.s.chat.>", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s.fanout", true},
			{pub, "$JS.ACK.CHAT_s.fanout.1.2.3.4.5", true},
			{pub, "$JS.API.CONSUMER.RESET.CHAT_s.fanout", true},
			{pub, "$JS.API.CONSUMER.RESET.CHAT_s.other", false},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s.dlvcatchup.cotal.s.chat.*.*.general", true},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s.dlvhistory.cotal.s.chat.*.*.general", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.CHAT_s.dlvhistory", true},
			{pub, "$JS.API.CONSUMER.DELETE.CHAT_s.dlvhistory", true},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.CHAT_s.dlvhistory", false},
			{pub, "$JS.API.DIRECT.GET.CHAT_s", false},
			{pub, "$JS.API.STREAM.MSG.GET.CHAT_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.CHAT_s." + hist + ".cotal.s.chat.>", false},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s.x", false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.DM_s.dm_local-bob-" + uidB, false},
			{pub, "cotal.s.dlv.local.bob." + uidB, true},
			{pub, "$JS.API.CONSUMER.CREATE.DLV_s.dlv_local-bob-" + uidB + ".cotal.s.dlv.local.bob." + uidB, true},
			// INBOX: the reference's fan-out writes entries, the one reader durable moves them.
			{pub, "cotal.s.dinbox.local.bob." + uidB, true},
			{pub, "$JS.API.CONSUMER.CREATE.INBOX_s.reader.cotal.s.dinbox.>", true},
			{pub, "$JS.API.CONSUMER.DURABLE.CREATE.INBOX_s.reader", true},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.INBOX_s.reader", true},
			{pub, "$JS.ACK.INBOX_s.reader.1.2.3.4.5", true},
			{pub, "$JS.API.STREAM.INFO.INBOX_s", true},
			{pub, "$JS.API.CONSUMER.CREATE.INBOX_s.other.cotal.s.dinbox.>", false},
			{pub, "$JS.API.CONSUMER.MSG.NEXT.INBOX_s.other", false},
			{pub, "$JS.API.DIRECT.GET.INBOX_s", false},
			{pub, "$KV.cotal_delivery_s.lease.0", true},
			{pub, "$KV.cotal_members_s.general/local.bob." + uidB, true},
			{pub, "$KV.cotal_acl_s.local.bob." + uidB, true},
			{pub, "$KV.cotal_channels_s.general", false},
			// Presence: the liveness watcher rewrites an agent's entry offline when its
			// connection drops; no other bucket of the messaging plane is writable.
			{pub, "$KV.cotal_presence_s.local.bob", true},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_presence_s.$KV.cotal_presence_s.local.bob", true},
			{pub, "$JS.API.STREAM.INFO.KV_cotal_presence_s", true},
			{pub, "$JS.API.STREAM.PURGE.KV_cotal_presence_s", false},
			{pub, "$JS.API.CONSUMER.CREATE.KV_cotal_presence_s", false},
			{pub, "$JS.API.DIRECT.GET.KV_cotal_channels_s.$KV.cotal_channels_s.general", true},
			{sub, "cotal.s.ctl.delivery.*.*", true},
			{sub, "cotal.s.ctl.delivery-admin.*.*", true},
			{sub, "cotal.s.live.delivery.*.*", true},
			{sub, "cotal.s.chat.>", false},
			{sub, "cotal.s.inst.>", false},
			{pub, "cotal.s.ctl.delivery.local.bob.reply.abc", true},
			{pub, "cotal.s.ctl.delivery.local.bob", false},
			{pub, "cotal.s.live.delivery.local.bob.reply.abc", true},
			{pub, "$SYS.REQ.ACCOUNT.PING.CONNZ", true},
			{pub, "$SYS.REQ.SERVER.PING.KICK", false},
			{pub, "cotal.s.chat.local.cotal_delivery.general", false},
			{pub, "cotal.s.inst.local.bob.local.cotal_delivery", false},
			{pub, "$JS.API.STREAM.CREATE.DLV_s", false},
			{pub, "$JS.API.STREAM.DELETE.CHAT_s", false},
			{pub, "$JS.API.DIRECT.GET.DLV_s.cotal.s.dlv.local.bob." + uidB, false},
		}},
		{"provisioner", prov, []row{
			{pub, "cotal.s.chat.local.bob.general", true},
			{pub, "$JS.API.STREAM.CREATE.CHAT_s", true},
			{pub, "$JS.API.CONSUMER.CREATE.DM_s.dm_local-bob-" + uidB, true},
			{sub, ">", true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			perms, err := acct.Permissions(c.spec, user)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range c.rows {
				p, verb := perms.Sub, "subscribe"
				if r.isPub {
					p, verb = perms.Pub, "publish"
				}
				if got := allowed(p, r.subject); got != r.want {
					t.Errorf("%s %s: allowed %v, want %v", verb, r.subject, got, r.want)
				}
			}
			if c.spec.Profile != ProfileProvisioner && len(perms.Pub.Allow) == 0 {
				t.Error("empty publish allow-list: the broker would allow everything")
			}
		})
	}
}

// TestPermissionsUseBuilders checks the grants against protocol's builders directly, so a
// change of subject layout in protocol moves the grants with it.
func TestPermissionsUseBuilders(t *testing.T) {
	acct := &Account{space: "s"}
	perms, err := acct.Permissions(UserSpec{Name: "a", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}, newUserKey(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		protocol.ChatSubject("s", alice, "general"),
		protocol.InstSubject("s", bob, alice),
		protocol.SvcSubject("s", "any", alice),
		"$KV." + protocol.BucketPresence("s") + "." + alice.String(),
		"$JS.API.CONSUMER.INFO." + protocol.StreamDM("s") + "." + protocol.ConsumerDM(alice, uidA),
	} {
		if !allowed(perms.Pub, s) {
			t.Errorf("publish %s refused", s)
		}
	}
	if !allowed(perms.Sub, protocol.ChannelFilter("s", "general")) || allowed(perms.Sub, protocol.DMFilter("s", alice)) {
		t.Error("subscribe grants do not follow ChannelFilter/DMFilter")
	}
}

func TestPermissionsRefuseBadSpecs(t *testing.T) {
	acct := &Account{space: "s"}
	ok := UserSpec{Name: "alice", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA}
	with := func(f func(*UserSpec)) UserSpec { s := ok; f(&s); return s }
	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("channel-number-%03d.with.a.long.name", i)
	}
	cases := []struct {
		name string
		spec UserSpec
		want string
	}{
		{"unknown profile", with(func(s *UserSpec) { s.Profile = "root" }), `--profile "root": want agent, observer, admin, delivery, manager or provisioner`},
		{"no name", with(func(s *UserSpec) { s.Name = "" }), "name"},
		{"observer with post ACL", UserSpec{Name: "c", Profile: ProfileObserver, Principal: alice, AllowPublish: []string{"general"}}, "--allow-publish is only for the agent profile, not observer"},
		{"admin with read ACL", UserSpec{Name: "w", Profile: ProfileAdmin, Principal: alice, AllowSubscribe: []string{"general"}}, "--allow-subscribe is only for the agent profile, not admin"},
		{"provisioner with role", UserSpec{Name: "p", Profile: ProfileProvisioner, Role: "x"}, "--role is only for the agent profile, not provisioner"},
		{"observer with boot set", UserSpec{Name: "c", Profile: ProfileObserver, Principal: alice, Subscribe: []string{"general"}}, "subscribe) is only for the agent profile"},
		{"agent without principal", with(func(s *UserSpec) { s.Principal = protocol.Principal{} }), "principal: owner"},
		{"nkey owner", with(func(s *UserSpec) { s.Principal.Owner = "UABC" }), `owner "UABC" is not a principal owner`},
		{"dotted actor", with(func(s *UserSpec) { s.Principal.Actor = "a.b" }), `actor "a.b"`},
		{"agent without uid", with(func(s *UserSpec) { s.LifecycleUID = "" }), "an agent credential needs one"},
		{"bad uid", with(func(s *UserSpec) { s.LifecycleUID = "UPPER" }), `lifecycle uid "UPPER"`},
		{"bad role", with(func(s *UserSpec) { s.Role = "a.b" }), `--role: invalid role "a.b"`},
		{"negative expiry", with(func(s *UserSpec) { s.ExpiresIn = -time.Hour }), "--expires-in -1h0m0s"},
		{"sanitisable channel", with(func(s *UserSpec) { s.AllowPublish = []string{"foo/bar"} }), `--allow-publish: invalid channel "foo/bar"`},
		{"inner >", with(func(s *UserSpec) { s.AllowSubscribe = []string{"a.>.b"} }), `--allow-subscribe: invalid channel "a.>.b"`},
		{"empty segment", with(func(s *UserSpec) { s.Subscribe = []string{"a..b"} }), `subscribe: invalid channel "a..b"`},
		{"boot set outside read ACL", with(func(s *UserSpec) {
			s.Subscribe, s.AllowSubscribe = []string{"general", "secret"}, []string{"general"}
		}), `subscribe "secret" is outside the read ACL`},
		{"wider boot pattern", with(func(s *UserSpec) {
			s.Subscribe, s.AllowSubscribe = []string{"team.>"}, []string{"team.*"}
		}), `subscribe "team.>" is outside the read ACL`},
		{"policy too big", with(func(s *UserSpec) { s.AllowSubscribe, s.AllowPublish = many, many }), "over the 16384-byte limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := acct.Permissions(c.spec, newUserKey(t))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := acct.Permissions(ok, "not-a-key"); err == nil {
		t.Fatal("a bad user key was accepted")
	}
	// Covered boot sets pass.
	for _, sub := range [][]string{{"team.a"}, {"team.*"}, {"team.a.b"}, {"team.>"}} {
		spec := with(func(s *UserSpec) { s.Subscribe, s.AllowSubscribe = sub, []string{"team.>"} })
		if _, err := acct.Permissions(spec, newUserKey(t)); err != nil {
			t.Errorf("subscribe %v within team.>: %v", sub, err)
		}
	}
}

func TestMint(t *testing.T) {
	c := mustOpen(t, t.TempDir())
	acct, err := c.Space("prod")
	if err != nil {
		t.Fatal(err)
	}
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "Alice_1"}
	creds, err := acct.Mint(UserSpec{Name: "Alice", Profile: ProfileAgent, Principal: me, LifecycleUID: uidA,
		AllowSubscribe: []string{"general"}, ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(creds), "-----BEGIN NATS USER JWT-----") || !strings.Contains(string(creds), "-----BEGIN USER NKEY SEED-----") {
		t.Fatalf("not a NATS creds file:\n%s", creds)
	}
	uc := decodeCreds(t, creds)
	if uc.Issuer != acct.SigningKey() || uc.IssuerAccount != acct.PublicKey() || uc.Name != "Alice" {
		t.Fatalf("issuer %s (account %s), name %q; want the signing key of %s", uc.Issuer, uc.IssuerAccount, uc.Name, acct.PublicKey())
	}
	if want := []string{"owner:local", "actor:Alice_1", "principal:local.Alice_1", "uid:" + uidA, "profile:agent"}; !slices.Equal(uc.Tags, want) {
		t.Fatalf("tags %v, want %v (case kept)", uc.Tags, want)
	}
	if d := time.Until(time.Unix(uc.Expires, 0)); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("expires in %s, want about an hour", d)
	}
	prefix, err := InboxPrefix(creds)
	if err != nil || prefix != "_INBOX_"+uc.Subject {
		t.Fatalf("InboxPrefix = %q, %v; want _INBOX_%s", prefix, err, uc.Subject)
	}
	if !allowed(uc.Permissions.Sub, prefix+".x") {
		t.Fatal("the minted user may not read its own inbox")
	}
	b, err := json.Marshal(uc.Permissions)
	if err != nil || len(b) > MaxPolicySize {
		t.Fatalf("policy %d bytes, %v", len(b), err)
	}
	if _, err := acct.Mint(UserSpec{Name: "x", Profile: ProfileObserver, Principal: me, AllowPublish: []string{"general"}}); err == nil ||
		!strings.Contains(err.Error(), "--allow-publish is only for the agent profile") {
		t.Fatalf("Mint of a bad spec: %v", err)
	}
	if _, err := InboxPrefix([]byte("garbage")); err == nil {
		t.Fatal("InboxPrefix accepted garbage")
	}
}

func newUserKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// An agent whose read set is omitted reads no channel, as the reference's provision.ts
// mints it (no-implicit-general.smoke.ts: the broker denies chat.*.*.general); an explicit
// empty read set reads no channel either; a given one reads exactly it.
func TestPermissionsNoImplicitGeneral(t *testing.T) {
	acct := &Account{space: "s"}
	general, team := protocol.ChannelFilter("s", "general"), protocol.ChannelFilter("s", "team")
	hist := func(ch string) string {
		return api(verbConsumerCreate, protocol.StreamChat("s"), protocol.ConsumerHistory(alice, uidA), protocol.ChannelFilter("s", ch))
	}
	for _, tc := range []struct {
		name           string
		sub, allow     []string
		general, teams bool
	}{
		{"omitted", nil, nil, false, false},
		{"empty allowSubscribe", nil, []string{}, false, false},
		{"empty subscribe", []string{}, nil, false, false},
		{"both empty", []string{}, []string{}, false, false},
		{"allowSubscribe given", nil, []string{"team"}, false, true},
		{"subscribe given", []string{"team"}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := UserSpec{Name: "a", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA, Subscribe: tc.sub, AllowSubscribe: tc.allow}
			perms, err := acct.Permissions(spec, newUserKey(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := allowed(perms.Sub, general); got != tc.general {
				t.Errorf("live general: %v, want %v", got, tc.general)
			}
			if got := allowed(perms.Pub, hist("general")); got != tc.general {
				t.Errorf("history of general: %v, want %v", got, tc.general)
			}
			if got := allowed(perms.Sub, team); got != tc.teams {
				t.Errorf("live team: %v, want %v", got, tc.teams)
			}
			want := []string{}
			if tc.general {
				want = []string{"general"}
			} else if tc.teams {
				want = []string{"team"}
			}
			if got := spec.ReadACL(); !slices.Equal(got, want) {
				t.Errorf("ReadACL %v, want %v", got, want)
			}
		})
	}
}
