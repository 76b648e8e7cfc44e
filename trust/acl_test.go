package trust

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

var carol = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "carol"}

// oneSpace starts a broker trusting a new chain with the provisioned space "alpha".
func oneSpace(t *testing.T) *space {
	t.Helper()
	chain := mustOpen(t, t.TempDir())
	sp := newSpace(t, chain, "alpha")
	sp.provisionSpace(t, startBroker(t, chain))
	return sp
}

func agentSpec(p protocol.Principal, uid string, read, post []string) UserSpec {
	return UserSpec{Name: p.Actor, Profile: ProfileAgent, Principal: p, LifecycleUID: uid, AllowSubscribe: read, AllowPublish: post}
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func TestAgentCannotForgeSender(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	b := sp.dial(t, agentSpec(bob, uidB, general, general))
	bobSub, err := b.nc.SubscribeSync(protocol.ChannelFilter(sp.name, "general"))
	if err != nil {
		t.Fatal(err)
	}
	b.noErrors(t)

	// Every subject carrying bob's sender tokens is refused by the broker.
	a.pubRefused(t, protocol.ChatSubject(sp.name, bob, "general"))
	a.pubRefused(t, protocol.InstSubject(sp.name, carol, bob))
	a.pubRefused(t, protocol.SvcSubject(sp.name, "reviewer", bob))
	a.pubRefused(t, "$KV."+protocol.BucketPresence(sp.name)+"."+bob.String())
	forged := protocol.ChatSubject(sp.name, bob, "general")
	a.requestRefused(t, forged, func(ctx context.Context) error {
		_, err := a.js.Publish(ctx, forged, []byte(`{}`))
		return err
	})

	// Alice's own post goes through and is the first thing bob sees: the forgeries, sent
	// before it on the same connection, were dropped, not delivered late.
	own := protocol.ChatSubject(sp.name, alice, "general")
	ack, err := a.js.Publish(t.Context(), own, []byte(`{"marker":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence != 1 {
		t.Fatalf("alice's post is message %d of CHAT; want 1 (nothing forged stored before it)", ack.Sequence)
	}
	if m := next(t, bobSub); m.Subject != own {
		t.Fatalf("bob first saw %s, want alice's own post %s", m.Subject, own)
	}
	for _, s := range []string{protocol.StreamDM(sp.name), protocol.StreamTask(sp.name)} {
		if n := streamMsgs(t, sp.prov.js, s); n != 0 {
			t.Fatalf("%s holds %d forged messages", s, n)
		}
	}
}

func TestAgentDMsAreBindOnly(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	aliceDM := sp.precreateDM(t, alice, uidA)
	bobDM := sp.precreateDM(t, bob, uidB)
	sp.precreateRole(t, "reviewer")
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	bs := agentSpec(bob, uidB, general, general)
	bs.Role = "reviewer"
	b := sp.dial(t, bs)
	dm, task := protocol.StreamDM(sp.name), protocol.StreamTask(sp.name)

	// No live DM subject, not even its own: DMs are read through the durable only.
	a.subRefused(t, protocol.DMFilter(sp.name, bob))
	a.subRefused(t, protocol.DMFilter(sp.name, alice))
	a.subRefused(t, protocol.InstSubject(sp.name, bob, carol))
	a.subRefused(t, protocol.InstAll(sp.name))
	a.subRefused(t, protocol.RoleFilter(sp.name, "reviewer"))
	// Nor another connection's replies, which carry pulled DMs.
	a.subRefused(t, "_INBOX.>")
	a.subRefused(t, b.inbox+".>")

	// Bob's durable can be neither bound, pulled, re-targeted nor deleted.
	a.requestRefused(t, api(verbConsumerInfo, dm, bobDM), func(ctx context.Context) error {
		_, err := a.js.Consumer(ctx, dm, bobDM)
		return err
	})
	a.requestRefused(t, api(verbConsumerNext, dm, bobDM), func(ctx context.Context) error {
		_, err := a.nc.RequestWithContext(ctx, api(verbConsumerNext, dm, bobDM), []byte(`{"batch":1}`))
		return err
	})
	retarget := jetstream.ConsumerConfig{Durable: bobDM, FilterSubject: protocol.InstAll(sp.name), AckPolicy: jetstream.AckExplicitPolicy}
	a.requestRefused(t, api(verbConsumerCreate, dm, bobDM, retarget.FilterSubject), func(ctx context.Context) error {
		_, err := a.js.CreateOrUpdateConsumer(ctx, dm, retarget)
		return err
	})
	a.requestRefused(t, api(verbConsumerDelete, dm, bobDM), func(ctx context.Context) error {
		return a.js.DeleteConsumer(ctx, dm, bobDM)
	})
	// Nor can alice make a durable of her own over bob's DMs, in any create form, or
	// delete her own.
	spy := protocol.ConsumerDM(alice, uidX)
	a.requestRefused(t, api(verbConsumerCreate, dm, spy, protocol.DMFilter(sp.name, bob)), func(ctx context.Context) error {
		_, err := a.js.CreateConsumer(ctx, dm, jetstream.ConsumerConfig{Durable: spy, FilterSubject: protocol.DMFilter(sp.name, bob)})
		return err
	})
	for _, subject := range []string{api(verbConsumerCreate, dm), api(verbDurableCreate, dm, spy), api(verbConsumerCreate, dm, spy)} {
		a.requestRefused(t, subject, func(ctx context.Context) error {
			_, err := a.nc.RequestWithContext(ctx, subject, []byte(`{"stream_name":"`+dm+`","config":{"durable_name":"`+spy+`"}}`))
			return err
		})
	}
	a.requestRefused(t, api(verbConsumerDelete, dm, aliceDM), func(ctx context.Context) error {
		return a.js.DeleteConsumer(ctx, dm, aliceDM)
	})
	// Nor bind the role durable without the role.
	a.requestRefused(t, api(verbConsumerInfo, task, protocol.ConsumerRole("reviewer")), func(ctx context.Context) error {
		_, err := a.js.Consumer(ctx, task, protocol.ConsumerRole("reviewer"))
		return err
	})

	info, err := sp.prov.js.Consumer(t.Context(), dm, bobDM)
	if err != nil {
		t.Fatal(err)
	}
	if f := info.CachedInfo().Config.FilterSubject; f != protocol.DMFilter(sp.name, bob) {
		t.Fatalf("bob's durable now filters %s", f)
	}
	stream, err := sp.prov.js.Stream(t.Context(), dm)
	if err != nil {
		t.Fatal(err)
	}
	names := stream.ConsumerNames(t.Context())
	n := 0
	for range names.Name() {
		n++
	}
	if n != 2 {
		t.Fatalf("DM has %d consumers, want the two pre-created", n)
	}

	// What an agent may do: bind and consume its own durable, and its role's.
	if _, err := b.js.Publish(t.Context(), protocol.InstSubject(sp.name, alice, bob), []byte(`{"dm":1}`)); err != nil {
		t.Fatal(err)
	}
	mine := fetchOne(t, a.js, dm, aliceDM)
	if mine.Subject() != protocol.InstSubject(sp.name, alice, bob) {
		t.Fatalf("alice's durable delivered %s", mine.Subject())
	}
	if err := mine.DoubleAck(t.Context()); err != nil {
		t.Fatal(err)
	}
	ci, err := sp.prov.js.Consumer(t.Context(), dm, aliceDM)
	if err != nil {
		t.Fatal(err)
	}
	if st := ci.CachedInfo(); st.NumAckPending != 0 || st.AckFloor.Stream != 1 {
		t.Fatalf("after alice's ack: %d pending, ack floor %d; want 0 and 1", st.NumAckPending, st.AckFloor.Stream)
	}

	if _, err := a.js.Publish(t.Context(), protocol.SvcSubject(sp.name, "reviewer", alice), []byte(`{"ask":1}`)); err != nil {
		t.Fatal(err)
	}
	work := fetchOne(t, b.js, task, protocol.ConsumerRole("reviewer"))
	if err := work.DoubleAck(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.noErrors(t)
}

func fetchOne(t *testing.T, js jetstream.JetStream, stream, durable string) jetstream.Msg {
	t.Helper()
	cons, err := js.Consumer(t.Context(), stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(deadline))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		return m
	}
	t.Fatalf("nothing on %s: %v", durable, batch.Error())
	return nil
}

func TestAgentChannelACL(t *testing.T) {
	sp := oneSpace(t)
	chat := protocol.StreamChat(sp.name)
	a := sp.dial(t, agentSpec(alice, uidA, []string{"general", "news"}, []string{"general"}))
	b := sp.dial(t, agentSpec(bob, uidB, []string{"general", "news", "secret"}, []string{"general", "news", "secret"}))

	// Inside the read ACL: alice reads news, where only bob posts.
	news, err := a.nc.SubscribeSync(protocol.ChannelFilter(sp.name, "news"))
	if err != nil {
		t.Fatal(err)
	}
	a.noErrors(t)
	if _, err := b.js.Publish(t.Context(), protocol.ChatSubject(sp.name, bob, "news"), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, news); m.Subject != protocol.ChatSubject(sp.name, bob, "news") {
		t.Fatalf("alice got %s on news", m.Subject)
	}
	// Inside the post ACL: general.
	if _, err := a.js.Publish(t.Context(), protocol.ChatSubject(sp.name, alice, "general"), []byte(`{"g":1}`)); err != nil {
		t.Fatal(err)
	}
	// History of a channel she reads, through her own reader.
	hist := protocol.ConsumerHistory(alice, uidA)
	cons, err := a.js.CreateConsumer(t.Context(), chat, jetstream.ConsumerConfig{
		Name: hist, FilterSubject: protocol.ChannelFilter(sp.name, "general"), AckPolicy: jetstream.AckNonePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(deadline))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if m.Subject() != protocol.ChatSubject(sp.name, alice, "general") {
			t.Fatalf("history of general gave %s", m.Subject())
		}
	}
	if err := a.js.DeleteConsumer(t.Context(), chat, hist); err != nil {
		t.Fatal(err)
	}
	a.noErrors(t)

	// Outside: secret is neither readable live nor through history, and news, though
	// readable, is not postable (posting is default-deny).
	a.subRefused(t, protocol.ChannelFilter(sp.name, "secret"))
	a.subRefused(t, protocol.ChatAll(sp.name))
	secret := protocol.ChannelFilter(sp.name, "secret")
	a.requestRefused(t, api(verbConsumerCreate, chat, hist, secret), func(ctx context.Context) error {
		_, err := a.js.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{Name: hist, FilterSubject: secret})
		return err
	})
	a.requestRefused(t, api(verbConsumerCreate, chat, hist), func(ctx context.Context) error {
		_, err := a.js.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{Name: hist}) // no filter: everything
		return err
	})
	a.pubRefused(t, protocol.ChatSubject(sp.name, alice, "news"))
	a.pubRefused(t, protocol.ChatSubject(sp.name, alice, "secret"))
	toNews := protocol.ChatSubject(sp.name, alice, "news")
	a.requestRefused(t, toNews, func(ctx context.Context) error {
		_, err := a.js.Publish(ctx, toNews, []byte(`{}`))
		return err
	})
	if n := streamMsgs(t, sp.prov.js, chat); n != 2 {
		t.Fatalf("CHAT holds %d messages, want bob's news and alice's general", n)
	}
}

func TestObserverAndAdmin(t *testing.T) {
	sp := oneSpace(t)
	sp.precreateDM(t, alice, uidA)
	console := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "console"}
	web := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "web"}
	obs := sp.dial(t, UserSpec{Name: "console", Profile: ProfileObserver, Principal: console, LifecycleUID: uidC})
	adm := sp.dial(t, UserSpec{Name: "web", Profile: ProfileAdmin, Principal: web, LifecycleUID: uidX})
	b := sp.dial(t, agentSpec(bob, uidB, []string{"general"}, []string{"general"}))
	dm := protocol.StreamDM(sp.name)

	obsChat, err := obs.nc.SubscribeSync(protocol.ChatAll(sp.name))
	if err != nil {
		t.Fatal(err)
	}
	obs.noErrors(t)
	admDM, err := adm.nc.SubscribeSync(protocol.InstAll(sp.name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.nc.SubscribeSync(protocol.SvcAll(sp.name)); err != nil {
		t.Fatal(err)
	}
	adm.noErrors(t)

	if _, err := b.js.Publish(t.Context(), protocol.ChatSubject(sp.name, bob, "general"), []byte(`{"c":1}`)); err != nil {
		t.Fatal(err)
	}
	next(t, obsChat)
	dmSubject := protocol.InstSubject(sp.name, alice, bob)
	if _, err := b.js.Publish(t.Context(), dmSubject, []byte(`{"dm":1}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, admDM); m.Subject != dmSubject {
		t.Fatalf("admin saw %s, want the DM", m.Subject)
	}
	// The admin also reads DM history, through its own reader.
	hist := protocol.ConsumerHistory(web, uidX)
	cons, err := adm.js.CreateConsumer(t.Context(), dm, jetstream.ConsumerConfig{Name: hist, FilterSubject: protocol.InstAll(sp.name), AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(deadline))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range batch.Messages() {
		got++
	}
	if got != 1 {
		t.Fatalf("admin's DM history gave %d messages, want 1 (%v)", got, batch.Error())
	}
	adm.noErrors(t)

	// The observer sees no DM, and neither sends anything.
	obs.subRefused(t, protocol.InstAll(sp.name))
	obs.subRefused(t, protocol.DMFilter(sp.name, alice))
	obs.subRefused(t, protocol.SvcAll(sp.name))
	for _, subject := range []string{api(verbConsumerCreate, dm), api(verbConsumerCreate, dm, protocol.ConsumerHistory(console, uidC))} {
		obs.requestRefused(t, subject, func(ctx context.Context) error {
			_, err := obs.nc.RequestWithContext(ctx, subject, []byte(`{"stream_name":"`+dm+`","config":{}}`))
			return err
		})
	}
	obs.requestRefused(t, api(verbConsumerNext, dm, protocol.ConsumerDM(alice, uidA)), func(ctx context.Context) error {
		_, err := obs.nc.RequestWithContext(ctx, api(verbConsumerNext, dm, protocol.ConsumerDM(alice, uidA)), []byte(`{"batch":1}`))
		return err
	})
	for _, c := range []struct {
		conn *conn
		me   protocol.Principal
	}{{obs, console}, {adm, web}} {
		c.conn.pubRefused(t, protocol.ChatSubject(sp.name, c.me, "general"))
		c.conn.pubRefused(t, protocol.InstSubject(sp.name, alice, c.me))
		c.conn.pubRefused(t, protocol.SvcSubject(sp.name, "reviewer", c.me))
		c.conn.pubRefused(t, "$KV."+protocol.BucketPresence(sp.name)+"."+c.me.String())
	}
	// Nor may the admin disturb an agent's durable.
	adm.requestRefused(t, api(verbConsumerDelete, dm, protocol.ConsumerDM(alice, uidA)), func(ctx context.Context) error {
		return adm.js.DeleteConsumer(ctx, dm, protocol.ConsumerDM(alice, uidA))
	})
	adm.requestRefused(t, api(verbConsumerNext, dm, protocol.ConsumerDM(alice, uidA)), func(ctx context.Context) error {
		_, err := adm.nc.RequestWithContext(ctx, api(verbConsumerNext, dm, protocol.ConsumerDM(alice, uidA)), []byte(`{"batch":1}`))
		return err
	})
}

func TestSpacesAreIsolated(t *testing.T) {
	chain := mustOpen(t, t.TempDir())
	alpha, beta := newSpace(t, chain, "alpha"), newSpace(t, chain, "beta")
	url := startBroker(t, chain)
	alpha.provisionSpace(t, url)
	beta.provisionSpace(t, url)

	// Even alpha's all-powerful provisioner cannot reach beta: beta's subjects and streams
	// do not exist in alpha's account.
	toBeta := protocol.ChatSubject("beta", bob, "general")
	if _, err := alpha.prov.js.Publish(t.Context(), toBeta, []byte(`{}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("alpha publishing on %s: %v; want no stream responding", toBeta, err)
	}
	if _, err := alpha.prov.js.Stream(t.Context(), protocol.StreamChat("beta")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("alpha looking up CHAT_beta: %v; want not found", err)
	}
	if n := streamMsgs(t, beta.prov.js, protocol.StreamChat("beta")); n != 0 {
		t.Fatalf("CHAT_beta holds %d messages from alpha", n)
	}
	// An agent of alpha holds no grant in beta's subject tree.
	a := alpha.dial(t, agentSpec(alice, uidA, []string{"general"}, []string{"general"}))
	a.pubRefused(t, toBeta)
	a.subRefused(t, protocol.ChannelFilter("beta", "general"))

	// And alpha's signing key cannot mint a user into beta.
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	uc := jwt.NewUserClaims(mustPub(user))
	uc.IssuerAccount = beta.acct.PublicKey()
	token, err := uc.Encode(alpha.acct.signer)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, []byte(mustSeed(user)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "forged.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(url, nats.UserCredentials(path), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a user of beta signed with alpha's signing key was let in")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("forged beta user: %v; want an authorization violation", err)
	}

	// The system account answers $SYS requests.
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sysPath := filepath.Join(t.TempDir(), "sys.creds")
	if err := os.WriteFile(sysPath, sysCreds, 0o600); err != nil {
		t.Fatal(err)
	}
	sys, err := nats.Connect(url, nats.UserCredentials(sysPath))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if _, err := sys.Request("$SYS.REQ.SERVER.PING.VARZ", nil, deadline); err != nil {
		t.Fatalf("system request: %v", err)
	}
}
