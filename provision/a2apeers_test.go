package provision_test

import (
	"slices"
	"testing"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The A2A peer registry is a bucket of one value per key, bounded rows and no rollup, and
// a space provisioned before it existed gains it at the next Space, keeping the rest.
func TestSpaceA2APeersBucket(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	name := protocol.BucketA2APeers("prod")
	c := streamConfig(t, js, "KV_"+name)
	if c.AllowRollup || c.MaxMsgsPerSubject != 1 || c.MaxMsgSize != 64<<10 || !slices.Equal(c.Subjects, []string{"$KV." + name + ".>"}) {
		t.Errorf("a2a peers bucket rollup %v history %d max msg size %d subjects %v; want false 1 65536 [$KV.%s.>]",
			c.AllowRollup, c.MaxMsgsPerSubject, c.MaxMsgSize, c.Subjects, name)
	}
	if err := js.DeleteStream(ctx, "KV_"+name); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(ctx, js, "prod", provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Created, []string{name}) || len(rep.Updated) != 0 {
		t.Fatalf("report %+v, want only the a2a peers bucket created", rep)
	}
}
