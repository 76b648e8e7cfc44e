package backup

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// ErrUnsafeConsumer reports a restored durable whose config is not the one its name
// stands for: a bind-only durable (DM, hand-off, role queue, bucket watcher) with another
// filter, or one an agent reads that delivers somewhere else. An archive's checksums show
// it is whole, not who wrote it, so a restore checks what the names grant.
var ErrUnsafeConsumer = errors.New("the backup holds a consumer that is not the one its name stands for")

// principalName matches <owner>-<actor>-<uid>, the tail of a per-lifecycle durable's name.
var principalName = regexp.MustCompile(`^([A-Za-z0-9_]+)-([A-Za-z0-9_]+)-([a-z0-9]+)$`)

// expected is the config a durable's name stands for, when the name is one an agent's
// credential binds or reads: want is nil for a name no agent reaches (the daemons' own).
func expected(space, stream, name string) (want *jetstream.ConsumerConfig, err error) {
	parse := func(prefix string) (protocol.Principal, string, bool) {
		m := principalName.FindStringSubmatch(strings.TrimPrefix(name, prefix))
		if m == nil {
			return protocol.Principal{}, "", false
		}
		return protocol.Principal{Owner: m[1], Actor: m[2]}, m[3], true
	}
	cfg := func(c jetstream.ConsumerConfig) (*jetstream.ConsumerConfig, error) { return &c, nil }
	switch {
	case strings.HasPrefix(name, "dm_"):
		p, _, ok := parse("dm_")
		if !ok || stream != protocol.StreamDM(space) {
			return nil, fmt.Errorf("%s on %s: a DM durable's name on another stream, or malformed", name, stream)
		}
		return cfg(jetstream.ConsumerConfig{FilterSubject: protocol.DMFilter(space, p)})
	case strings.HasPrefix(name, "dlv_"):
		p, uid, ok := parse("dlv_")
		if !ok || stream != protocol.StreamDLV(space) {
			return nil, fmt.Errorf("%s on %s: a hand-off durable's name on another stream, or malformed", name, stream)
		}
		return cfg(provision.HandoffConfig(space, p, uid))
	case strings.HasPrefix(name, "chathist_"):
		if _, _, ok := parse("chathist_"); !ok || stream != protocol.StreamChat(space) {
			return nil, fmt.Errorf("%s on %s: a history reader's name on another stream, or malformed", name, stream)
		}
		// Its filter is the agent's own choice within its read ACL: pinned at creation by
		// the broker, so a restored one is refused unless it is plain CHAT pull.
		return cfg(jetstream.ConsumerConfig{FilterSubject: "*"})
	case strings.HasPrefix(name, "svc_"):
		role := strings.TrimPrefix(name, "svc_")
		if stream != protocol.StreamTask(space) || protocol.ConsumerRole(role) != name {
			return nil, fmt.Errorf("%s on %s: a role queue's name on another stream, or malformed", name, stream)
		}
		return cfg(provision.TaskQueueConfig(space, role))
	case strings.HasPrefix(name, "kvw-"):
		for _, k := range protocol.KVWatches {
			prefix := "kvw-" + string(k) + "-"
			if p, uid, ok := parse(prefix); ok && strings.HasPrefix(name, prefix) && stream == "KV_"+k.Bucket(space) {
				return cfg(provision.KVWatchConfig(space, k, p, uid))
			}
		}
		return nil, fmt.Errorf("%s on %s: a bucket watcher's name on another stream, or malformed", name, stream)
	}
	return nil, nil
}

// checkDurables refuses a restored stream's durable whose name stands for a config it
// does not have (ErrUnsafeConsumer): the filter and the deliver subject are what decide
// what its binder reads and where it goes.
func checkDurables(ctx context.Context, nc *nats.Conn, space, stream string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	var bad []string
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		c := ci.Config
		if c.Durable == "" {
			continue
		}
		want, err := expected(space, stream, c.Durable)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if want == nil {
			continue
		}
		filterOK := c.FilterSubject == want.FilterSubject && len(c.FilterSubjects) == 0
		if want.FilterSubject == "*" { // a history reader: any CHAT filter, pull only
			filterOK = strings.HasPrefix(c.FilterSubject, "cotal."+space+".chat.") || c.FilterSubject == protocol.ChatAll(space)
		}
		if !filterOK || c.DeliverSubject != want.DeliverSubject || c.DeliverGroup != "" {
			bad = append(bad, fmt.Sprintf("%s on %s: filter %q, deliver subject %q (its name stands for filter %q, deliver subject %q)",
				c.Durable, stream, c.FilterSubject, c.DeliverSubject, want.FilterSubject, want.DeliverSubject))
		}
	}
	if err := list.Err(); err != nil {
		return fmt.Errorf("stream %s: list consumers: %w", stream, err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrUnsafeConsumer, strings.Join(bad, "; "))
	}
	return nil
}
