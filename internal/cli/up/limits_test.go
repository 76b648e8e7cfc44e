package up

import (
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/cotal-ai/cotal/trust"
)

// A space made before limits existed keeps unlimited storage and memory (it may hold more
// than the default already) and gets the other defaults; a new space gets every default.
func TestOlderSpaceKeepsItsStorage(t *testing.T) {
	l := olderSpaceLimits()
	if l.Storage != jwt.NoLimit || l.Memory != jwt.NoLimit {
		t.Fatalf("older space: storage %d, memory %d, want unlimited", l.Storage, l.Memory)
	}
	d := trust.DefaultLimits()
	if l.Streams != d.Streams || l.Consumers != d.Consumers || l.Conns != d.Conns || l.Subs != d.Subs || l.Payload != d.Payload {
		t.Fatalf("older space %s, want the defaults %s but storage and memory", l, d)
	}
	if d.Storage == jwt.NoLimit {
		t.Fatal("a new space's default storage is unlimited")
	}
	// No flag and no manifest: the older space's storage stays unlimited; a flag sets it.
	var o Options
	if got := o.Limits.Over(trust.Limits{}).Over(l); got.Storage != jwt.NoLimit {
		t.Fatalf("no flag and no manifest gave storage %d", got.Storage)
	}
	if err := o.Limits.Set("storage", "4GiB"); err != nil {
		t.Fatal(err)
	}
	if got := o.Limits.Over(trust.Limits{}).Over(l); got.Storage != 4<<30 {
		t.Fatalf("--max-storage 4GiB gave storage %d", got.Storage)
	}
}
