package interop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// post stores a raw post on CHAT as sender, as any implementation's client writes it.
func (m *dlvMesh) post(sender, channel string, body string) {
	m.t.Helper()
	if _, err := m.js.Publish(m.t.Context(), "cotal."+space+".chat.local."+sender+"."+channel, []byte(body)); err != nil {
		m.t.Fatal(err)
	}
}

// textPost is a reference CotalMessage from local.<from> on channel.
func textPost(id string, ts int, from, channel, text string) string {
	return fmt.Sprintf(`{"id":%q,"ts":%d,"space":%q,"from":{"id":"local.%s","name":%q},"channel":%q,"parts":[{"kind":"text","text":%q}]}`,
		id, ts, space, from, from, channel, text)
}

// historyPage is a readHistory reply.
type historyPage struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Data  struct {
		Items []struct {
			ID      string `json:"id"`
			Channel string `json:"channel"`
		} `json:"items"`
		Complete bool `json:"complete"`
	} `json:"data"`
}

func readPage(t *testing.T, b []byte) historyPage {
	t.Helper()
	var p historyPage
	if err := json.Unmarshal(b, &p); err != nil || !p.OK {
		t.Fatalf("readHistory answer %s: %v", b, err)
	}
	return p
}

// ids lists a page's item ids, oldest first.
func (p historyPage) ids() []string {
	out := []string{}
	for _, it := range p.Data.Items {
		out = append(out, it.ID)
	}
	return out
}

// TestForeignReadHistory: a member speaking only raw nats.go, whose read ACL row is the
// reference's, reads a channel's newest posts with a headerless readHistory on its ctl
// subject, as the reference's endpoint.ts readHistory asks and deliveryReadHistory
// answers: the last posts oldest first, posts of other channels and posts whose from.id
// is not the subject's sender left out, each message authenticated for the channel,
// complete only when nothing older is retained; the limit defaults to 100 and is clamped
// to 200; a channel outside allowSubscribe ∩ issuedAllowSubscribe, a pattern and a limit
// that is not a positive integer are refused with the reference's sentences.
func TestForeignReadHistory(t *testing.T) {
	m := newDLVMesh(t)
	uid := protocol.NewLifecycleUID()
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	m.put(protocol.BucketACL(space), protocol.MemberKey(bob, uid),
		[]byte(`{"allowSubscribe":["general","ops","quiet","wide"],"issuedAllowSubscribe":["general","ops","quiet"],"revision":2,"updatedAt":1700000000000}`))

	// 205 posts on general, another channel's posts between them, and a forged one.
	ts := 1700000001000
	for i := range 205 {
		m.post("alice", "general", textPost(fmt.Sprintf("g-%03d", i), ts+i, "alice", "general", "hi"))
		if i%10 == 0 {
			m.post("alice", "random", textPost(fmt.Sprintf("r-%03d", i), ts+i, "alice", "random", "elsewhere"))
		}
		if i == 203 {
			m.post("mallory", "general", textPost("forged", ts+i, "alice", "general", "not from mallory"))
		}
	}
	m.post("alice", "ops", textPost("ops-0", 1700000000000, "alice", "ops", "first"))
	m.post("alice", "ops", `{"id":"ops-1","ts":1700000000001,"space":"team","from":{"id":"local.alice","name":"alice"},"to":"local.bob","channel":"elsewhere","parts":[{"kind":"text","text":"second"}]}`)
	m.post("alice", "ops", textPost("ops-2", 1700000000002, "alice", "ops", "third"))

	m.serve()
	nc := m.foreign(m.agent("bob", uid, "general", "ops", "quiet"))
	req := func(args string) []byte {
		return ask(t, nc, "bob", []byte(`{"op":"readHistory","args":`+args+`,"from":{"id":"local.bob","name":"bob"}}`))
	}

	// The reference's page, field for field: ops-1 authenticated for ops (no to).
	sameJSON(t, "readHistory", ask(t, nc, "bob", fixture(t, "readHistory.request.json")), fixture(t, "readHistory.reply.json"))
	p := readPage(t, req(`{"channel":"ops","limit":3}`))
	if fmt.Sprint(p.ids()) != "[ops-0 ops-1 ops-2]" || !p.Data.Complete {
		t.Fatalf("ops, limit 3: %v complete %v", p.ids(), p.Data.Complete)
	}
	sameJSON(t, "empty channel", req(`{"channel":"quiet"}`), []byte(`{"ok":true,"data":{"items":[],"complete":true}}`))

	want := func(from, to int) string {
		var ids []string
		for i := from; i < to; i++ {
			ids = append(ids, fmt.Sprintf("g-%03d", i))
		}
		return fmt.Sprint(ids)
	}
	for _, c := range []struct {
		args     string
		from, to int
	}{
		{`{"channel":"general","limit":3}`, 202, 205}, // the forged post between them is skipped
		{`{"channel":" general "}`, 105, 205},         // default 100; the channel is trimmed
		{`{"channel":"general","limit":201}`, 5, 205}, // clamped to 200
		{`{"channel":"general","limit":2e2}`, 5, 205}, // an integer, written as JSON may
		{`{"channel":"general","limit":205}`, 5, 205}, // still clamped
		{`{"channel":"general","limit":1}`, 204, 205},
	} {
		p := readPage(t, req(c.args))
		if got := fmt.Sprint(p.ids()); got != want(c.from, c.to) || p.Data.Complete {
			t.Fatalf("%s: %s complete %v, want %s", c.args, got, p.Data.Complete, want(c.from, c.to))
		}
		for _, it := range p.Data.Items {
			if it.Channel != "general" {
				t.Fatalf("%s: item %s on %q", c.args, it.ID, it.Channel)
			}
		}
	}

	sameJSON(t, "outside the ACL", req(`{"channel":"random"}`), fixture(t, "readHistory-refused.reply.json"))
	for _, c := range []struct{ args, err string }{
		{`{"channel":"wide"}`, `readHistory: channel "wide" is not within your read ACL [general, ops, quiet, wide] - refused`},
		{`{"channel":"ops.*"}`, `readHistory: "ops.*" must be a concrete channel (durable membership is per-concrete-channel, not wildcard)`},
		{`{"channel":"  "}`, `readHistory: channel must be a non-blank string`},
		{`{"limit":3}`, `readHistory: channel must be a non-blank string`},
		{`{"channel":"ops","limit":0}`, `readHistory: limit must be a positive integer (got 0)`},
		{`{"channel":"ops","limit":-1}`, `readHistory: limit must be a positive integer (got -1)`},
		{`{"channel":"ops","limit":1.5}`, `readHistory: limit must be a positive integer (got 1.5)`},
		{`{"channel":"ops","limit":"5"}`, `readHistory: limit must be a positive integer (got "5")`},
		{`{"channel":"ops","limit":null}`, `readHistory: limit must be a positive integer (got null)`},
	} {
		want, _ := json.Marshal(map[string]any{"ok": false, "error": c.err})
		sameJSON(t, c.args, req(c.args), want)
	}

	// A principal without an ACL row reads nothing.
	carol := m.foreign(m.agent("carol", protocol.NewLifecycleUID(), "general"))
	sameJSON(t, "no ACL row", ask(t, carol, "carol", []byte(`{"op":"readHistory","args":{"channel":"general"},"from":{"id":"local.carol","name":"carol"}}`)),
		[]byte(`{"ok":false,"error":"readHistory: no read ACL on record for local.carol - not permitted"}`))
}

// TestGoReadHistory: the Go SDK's ReadHistory asks the same op; its credential's read
// ACL (recorded from its signed request) decides what it may read.
func TestGoReadHistory(t *testing.T) {
	m := newDLVMesh(t)
	m.serve()
	for i := range 3 {
		m.post("alice", "general", textPost(fmt.Sprintf("g-%d", i), 1700000000000+i, "alice", "general", "hi"))
	}
	m.post("alice", "random", textPost("r-0", 1700000000000, "alice", "random", "elsewhere"))
	bob := m.endpoint(m.agent("bob", protocol.NewLifecycleUID(), "general"))

	msgs, complete, err := bob.ReadHistory(t.Context(), "general", 2)
	if err != nil || len(msgs) != 2 || msgs[0].ID != "g-1" || msgs[1].ID != "g-2" || complete {
		t.Fatalf("general, 2: %v complete %v: %v", msgs, complete, err)
	}
	msgs, complete, err = bob.ReadHistory(t.Context(), "general", 0)
	if err != nil || len(msgs) != 3 || msgs[0].ID != "g-0" || !complete {
		t.Fatalf("general: %v complete %v: %v", msgs, complete, err)
	}
	if _, _, err := bob.ReadHistory(t.Context(), "random", 0); err == nil ||
		!strings.Contains(err.Error(), `readHistory: channel "random" is not within your read ACL [general] - refused`) {
		t.Fatalf("random: %v", err)
	}
}
