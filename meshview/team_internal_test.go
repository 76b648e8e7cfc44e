package meshview

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
)

// A write seen live before the bucket's stream stored it keeps the bucket pending until a
// read shows it: the value put, or the key gone for a delete; a read that shows an older
// value of the key does not count.
func TestWatchedBucketWaitsForTheWrite(t *testing.T) {
	b := newWatchedBucket("cotal_tasks_main")
	put := func(key, val string) {
		b.seen(&nats.Msg{Subject: "$KV.cotal_tasks_main." + key, Data: []byte(val)})
	}
	put("t.a.local.alice", `{"v":2}`)
	del := &nats.Msg{Subject: "$KV.cotal_tasks_main.c.a.local.bob", Header: nats.Header{}}
	del.Header.Set("KV-Operation", "DEL")
	b.seen(del)
	if len(b.kick) != 1 {
		t.Fatal("no read asked for")
	}
	older := []client.KVRecord{
		{Key: "t.a.local.alice", Value: []byte(`{"v":1}`), Op: jetstream.KeyValuePut},
		{Key: "c.a.local.bob", Value: []byte(`{}`), Op: jetstream.KeyValuePut},
	}
	if !b.shown(older) {
		t.Fatal("a read without either write counts as showing them")
	}
	half := []client.KVRecord{
		{Key: "t.a.local.alice", Value: []byte(`{"v":2}`), Op: jetstream.KeyValuePut},
		{Key: "c.a.local.bob", Value: []byte(`{}`), Op: jetstream.KeyValuePut},
	}
	if !b.shown(half) {
		t.Fatal("the delete is not shown yet")
	}
	if b.shown([]client.KVRecord{{Key: "t.a.local.alice", Value: []byte(`{"v":2}`), Op: jetstream.KeyValuePut},
		{Key: "c.a.local.bob", Op: jetstream.KeyValueDelete}}) {
		t.Fatal("both shown, still pending")
	}
	put("t.b.local.alice", `{}`)
	for range 12 {
		b.shown(nil)
	}
	if !b.giveUp() || b.waiting() {
		t.Fatal("a write no read shows is kept forever")
	}
}
