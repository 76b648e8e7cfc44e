package trust

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// createBody is a consumer create request for stream: a durable push consumer when
// deliver is set, filtered on filter.
func createBody(t *testing.T, stream, name, filter, deliver string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{
		"durable_name": name, "name": name, "filter_subject": filter, "deliver_subject": deliver,
		"ack_policy": "none", "deliver_policy": "all",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// No agent, observer or admin can create a consumer of any form on the public buckets: not
// a durable that would count against the stream's consumers, and not a push consumer
// whose deliver subject makes the server write bucket records into another stream
// (issue 12 items 9 and 10). They still read both buckets: one key and the whole bucket
// by Direct Get, presence changes by a plain subscription.
func TestPublicBucketsRefuseConsumers(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	obs := sp.dial(t, UserSpec{Name: "console", Profile: ProfileObserver, Principal: carol, LifecycleUID: uidC})
	adm := sp.dial(t, UserSpec{Name: "web", Profile: ProfileAdmin, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "web"}, LifecycleUID: uidX})
	presence, channels := protocol.BucketPresence(sp.name), protocol.BucketChannels(sp.name)
	chat := protocol.StreamChat(sp.name)
	into := protocol.ChatSubject(sp.name, bob, "general") // a stream subject the reader may read

	// What they may do: read a key, read the bucket, see a put live.
	presKV, err := sp.prov.js.KeyValue(t.Context(), presence)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*conn{a, obs, adm} {
		live, err := c.nc.SubscribeSync(kvPrefix + presence + ".>")
		if err != nil {
			t.Fatal(err)
		}
		c.noErrors(t)
		if _, err := presKV.Put(t.Context(), bob.String(), []byte(`{"b":1}`)); err != nil {
			t.Fatal(err)
		}
		if m := next(t, live); m.Subject != kvKey(presence, bob.String()) {
			t.Fatalf("live presence gave %s", m.Subject)
		}
		_ = live.Unsubscribe() // seen
		kv, err := c.js.KeyValue(t.Context(), presence)
		if err != nil {
			t.Fatal(err)
		}
		if e, err := kv.Get(t.Context(), bob.String()); err != nil || string(e.Value()) != `{"b":1}` {
			t.Fatalf("direct get of bob's presence: %v", err)
		}
		rep, err := c.nc.Request(api(verbDirectGet, kvStream(presence)), []byte(`{"seq":1,"next_by_subj":"`+kvPrefix+presence+`.>","batch":10}`), deadline)
		if err != nil || rep.Header.Get("Nats-Subject") != kvKey(presence, bob.String()) {
			t.Fatalf("batch direct get of presence: %v %v", rep, err)
		}
		c.noErrors(t)
	}
	for _, c := range []*conn{a, obs, adm} {
		for _, bucket := range []string{presence, channels} {
			s := kvStream(bucket)
			all := kvPrefix + bucket + ".>"
			for _, subject := range []string{
				api(verbConsumerCreate, s),
				api(verbConsumerCreate, s, "spy"),
				api(verbConsumerCreate, s, "spy", all),
				api(verbDurableCreate, s, "spy"),
			} {
				c.requestRefused(t, subject, func(ctx context.Context) error {
					_, err := c.nc.RequestWithContext(ctx, subject, createBody(t, s, "spy", all, into))
					return err
				})
			}
		}
	}
	for _, bucket := range []string{presence, channels} {
		s, err := sp.prov.js.Stream(t.Context(), kvStream(bucket))
		if err != nil {
			t.Fatal(err)
		}
		if n := s.CachedInfo().State.Consumers; n != 0 {
			t.Fatalf("%s has %d consumers, want none", kvStream(bucket), n)
		}
	}

	if n := streamMsgs(t, sp.prov.js, chat); n != 0 {
		t.Fatalf("CHAT holds %d messages the server wrote for a refused push consumer", n)
	}
}

// A Nats-Rollup: all header on an agent's own presence key purges nobody's record: the
// presence bucket refuses rollup (issue 12 item 11).
func TestPresenceRollupErasesNobody(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	b := sp.dial(t, agentSpec(bob, uidB, general, general))
	presence := protocol.BucketPresence(sp.name)
	if _, err := b.js.Publish(t.Context(), kvKey(presence, bob.String()), []byte(`{"bob":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.js.Publish(t.Context(), kvKey(presence, alice.String()), []byte(`{"alice":1}`)); err != nil {
		t.Fatal(err)
	}

	for _, how := range []string{jetstream.MsgRollupAll, jetstream.MsgRollupSubject} {
		m := nats.NewMsg(kvKey(presence, alice.String()))
		m.Header.Set(jetstream.MsgRollup, how)
		m.Data = []byte(`{"alice":2}`)
		var apiErr *jetstream.APIError
		if _, err := a.js.PublishMsg(t.Context(), m); !errors.As(err, &apiErr) {
			t.Fatalf("rollup %s put on alice's own key: %v; want the stream to refuse it", how, err)
		}
	}
	kv, err := sp.prov.js.KeyValue(t.Context(), presence)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(t.Context(), bob.String()); err != nil || string(e.Value()) != `{"bob":1}` {
		t.Fatalf("bob's presence after alice's rollup: %v", err)
	}
	if e, err := kv.Get(t.Context(), alice.String()); err != nil || string(e.Value()) != `{"alice":1}` {
		t.Fatalf("alice's presence after her refused rollup: %v", err)
	}
	a.noErrors(t)
}
