package clean

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// TestPurgeKeepsWhatCameAfter: a purge removes the posts of the channel that were counted
// (and confirmed), never one stored since, nor another channel's.
func TestPurgeKeepsWhatCameAfter(t *testing.T) {
	ctx := t.Context()
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const space = "main"
	if _, err := provision.Space(ctx, js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	post := func(channel string) {
		t.Helper()
		if _, err := js.Publish(ctx, protocol.ChatSubject(space, me, channel), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	post("general")
	post("general")
	post("random")
	rows, last, err := channelCounts(ctx, js, space, protocol.ChannelFilter(space, "general"))
	if err != nil || len(rows) != 1 || rows[0] != (ChannelRow{Name: "general", Messages: 2}) {
		t.Fatalf("counts %+v %v", rows, err)
	}
	post("general") // after the count: not confirmed, kept
	if err := purge(ctx, js, space, protocol.StreamChat(space), protocol.ChannelFilter(space, "general"), last); err != nil {
		t.Fatal(err)
	}
	rows, _, err = channelCounts(ctx, js, space, protocol.ChatAll(space))
	if err != nil || len(rows) != 2 || rows[0] != (ChannelRow{Name: "general", Messages: 1}) || rows[1] != (ChannelRow{Name: "random", Messages: 1}) {
		t.Fatalf("after purge %+v %v", rows, err)
	}
}
