package trust

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// An agent binds the two public-bucket watchers the provisioner made for its lifecycle, as
// the reference's agent endpoint does (issue 25 item 3): it reads their rails, acks, looks
// them up and may delete them. It still creates no consumer on either bucket, not even its
// own watcher by name, so no deliver subject of its choosing ever reaches the server, and
// it reaches no watcher of another lifecycle.
func TestAgentBindsItsKVWatchers(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	presence, channels := protocol.BucketPresence(sp.name), protocol.BucketChannels(sp.name)
	for _, lifecycle := range []string{uidA, uidB} { // alice's, and a later one of the same name
		if _, err := provision.KVWatches(t.Context(), sp.prov.js, sp.name, alice, lifecycle); err != nil {
			t.Fatal(err)
		}
	}
	presKV, err := sp.prov.js.KeyValue(t.Context(), presence)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := presKV.Put(t.Context(), bob.String(), []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}

	// Alice's presence rail: the last value of every key, then updates; each acked.
	rail, err := a.nc.SubscribeSync(protocol.KVWatchSubject(sp.name, protocol.KVWatchPresence, alice, uidA))
	if err != nil {
		t.Fatal(err)
	}
	a.noErrors(t)
	if m := next(t, rail); m.Subject != kvKey(presence, bob.String()) || string(m.Data) != `{"b":1}` {
		t.Fatalf("first watch entry %q %s", m.Subject, m.Data)
	} else if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
	if _, err := presKV.Put(t.Context(), bob.String(), []byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, rail); string(m.Data) != `{"b":2}` {
		t.Fatalf("update %s", m.Data)
	} else if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
	name := protocol.ConsumerKVWatch(protocol.KVWatchPresence, alice, uidA)
	info, err := a.nc.Request(api(verbConsumerInfo, kvStream(presence), name), nil, deadline)
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		Config struct {
			DeliverSubject string `json:"deliver_subject"`
		} `json:"config"`
		AckPending int `json:"num_ack_pending"`
	}
	if json.Unmarshal(info.Data, &ci) != nil || ci.Config.DeliverSubject != rail.Subject {
		t.Fatalf("consumer info %s", info.Data)
	}
	a.noErrors(t)

	// Refused: another lifecycle's rail, creating any consumer on the buckets (its own
	// watcher by name included, in the reference's subject form), pulling from its watcher,
	// and deleting another lifecycle's watcher.
	a.subRefused(t, protocol.KVWatchSubject(sp.name, protocol.KVWatchPresence, alice, uidB))
	a.subRefused(t, protocol.KVWatchSubject(sp.name, protocol.KVWatchChannels, bob, uidB))
	into := protocol.ChatSubject(sp.name, bob, "general")
	for _, bucket := range []string{presence, channels} {
		s := kvStream(bucket)
		own := protocol.ConsumerKVWatch(protocol.KVWatchPresence, alice, uidA)
		if bucket == channels {
			own = protocol.ConsumerKVWatch(protocol.KVWatchChannels, alice, uidA)
		}
		all := kvPrefix + bucket + ".>"
		for _, subject := range []string{api(verbConsumerCreate, s, own, all), api(verbConsumerCreate, s, own),
			api(verbConsumerCreate, s, "oc_probe_1", all), api(verbDurableCreate, s, own)} {
			a.requestRefused(t, subject, func(ctx context.Context) error {
				_, err := a.nc.RequestWithContext(ctx, subject, createBody(t, s, own, all, into))
				return err
			})
		}
		a.pubRefused(t, api(verbConsumerNext, s, own))
	}
	a.pubRefused(t, api(verbConsumerDelete, kvStream(presence), protocol.ConsumerKVWatch(protocol.KVWatchPresence, alice, uidB)))
	if n := streamMsgs(t, sp.prov.js, protocol.StreamChat(sp.name)); n != 0 {
		t.Fatalf("CHAT holds %d messages", n)
	}

	// Alice deletes both of her watchers when she stops for good; uidB's stays.
	for _, k := range protocol.KVWatches {
		s, n := kvStream(k.Bucket(sp.name)), protocol.ConsumerKVWatch(k, alice, uidA)
		rep, err := a.nc.Request(api(verbConsumerDelete, s, n), nil, deadline)
		if err != nil {
			t.Fatalf("delete %s: %v", n, err)
		}
		if !strings.Contains(string(rep.Data), `"success":true`) {
			t.Fatalf("delete %s: %s", n, rep.Data)
		}
		if _, err := sp.prov.js.PushConsumer(t.Context(), s, n); err != jetstream.ErrConsumerNotFound {
			t.Fatalf("%s after alice deleted it: %v", n, err)
		}
		if _, err := sp.prov.js.PushConsumer(t.Context(), s, protocol.ConsumerKVWatch(k, alice, uidB)); err != nil {
			t.Fatalf("the later lifecycle's watcher: %v", err)
		}
	}
}
