package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

const space = "main"

// openMesh starts a broker with space provisioned as an open mesh and returns its URL.
func openMesh(t testing.TB) string {
	t.Helper()
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return srv.ClientURL()
}

// peer connects name and joins channels; closed at cleanup.
func peer(t testing.TB, url, name string, channels ...string) *client.Endpoint {
	t.Helper()
	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: name, Role: "reviewer", Logger: brokertest.Logger(t),
		Meta: map[string]any{"connector": "claude"}})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context(), channels...); err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
	return ep
}

// startWeb runs `cotal web --port 0 --no-open` in this process against the mesh at url
// and returns the page URL it reported ready with. extra are more flags.
func startWeb(t testing.TB, url string, extra ...string) string {
	t.Helper()
	return launchWeb(t, "", nil, append([]string{"--server", url}, extra...)...)
}

// launchWeb runs `cotal web --space main --port 0 --no-open` and args in this process, in
// the project at dir ("" for none), with wrap (if set) changing the Options the command
// built before it runs, and returns the page URL it reported ready with.
func launchWeb(t testing.TB, dir string, wrap func(*web.Options), args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	wd := home
	if dir != "" {
		wd = dir
	}
	env := map[string]string{
		"HOME": home, "COTAL_HOME": filepath.Join(home, ".cotal"), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
	}
	// A bare fd (no *os.File whose finalizer could close it later) for SignalReady to close.
	fd, err := bareFD(w)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	env[cmdutil.ReadyFDEnv] = fd
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{
		IO:         ios,
		Getwd:      func() (string, error) { return wd, nil },
		Executable: os.Executable,
		Getenv:     func(k string) string { return env[k] },
		Logger:     slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	var runF func(context.Context, *web.Options) error
	if wrap != nil {
		runF = func(ctx context.Context, o *web.Options) error { wrap(o); return web.RunWeb(ctx, o) }
	}
	cmd := web.NewCmdWeb(f, runF)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs(append([]string{"--space", space, "--port", "0", "--no-open"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cotal web: %v", err)
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	select {
	case l := <-line:
		r.Close()
		page, ok := strings.CutPrefix(strings.TrimSpace(l), "ready ")
		if !ok {
			t.Fatalf("ready line %q", l)
		}
		return page
	case err := <-done:
		done <- nil
		t.Fatalf("cotal web ended before ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("cotal web not ready")
	}
	return ""
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// getJSON GETs base+path and decodes the answer into v, returning the status.
func getJSON(t testing.TB, base, path string, v any) int {
	t.Helper()
	res, err := http.Get(strings.TrimSuffix(base, "/") + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
	return res.StatusCode
}

// sse reads a feed: each event as (id, type, data).
type sseEvent struct{ id, typ, data string }

func readSSE(t testing.TB, body io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			if ev.typ != "" {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(l, "id: "):
			ev.id = l[4:]
		case strings.HasPrefix(l, "event: "):
			ev.typ = l[7:]
		case strings.HasPrefix(l, "data: "):
			ev.data = l[6:]
		}
	}
	close(out)
}

func openFeed(t testing.TB, base, lastID string) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", strings.TrimSuffix(base, "/")+"/feed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("feed content type %q", ct)
	}
	out := make(chan sseEvent, 64)
	go readSSE(t, res.Body, out)
	return out
}

func next(t testing.TB, ch <-chan sseEvent, what string) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the feed ended", what)
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no event", what)
	}
	return sseEvent{}
}

// nextMessage skips roster events up to the next message event.
func nextMessage(t testing.TB, ch <-chan sseEvent, what string) sseEvent {
	t.Helper()
	for {
		if ev := next(t, ch, what); ev.typ == "message" {
			return ev
		}
	}
}

func TestAPIShapes(t *testing.T) {
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	bob := peer(t, url, "bob")
	base := startWeb(t, url)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("page URL %q, want the plain loopback address on a non-default port", base)
	}
	ctx := t.Context()
	if err := alice.SetStatus(ctx, protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Post(ctx, "team", client.Text("<b>hi</b>")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.DM(ctx, alice.Principal(), client.Text("psst")); err != nil {
		t.Fatal(err)
	}

	var meta web.Meta
	if st := getJSON(t, base, "/api/meta", &meta); st != 200 || meta.Space != space || meta.PID != os.Getpid() || !meta.DMVisible || !meta.CanPost {
		t.Fatalf("meta %d %+v", st, meta)
	}
	if meta.HistoryError != "" {
		t.Fatalf("meta historyError %q, want none: the start-up read reads the streams", meta.HistoryError)
	}
	var roster web.Roster
	meshtest.Until(t, "alice waiting in the roster", 15*time.Second, func() bool {
		getJSON(t, base, "/api/roster", &roster)
		return len(roster.NeedsYou) == 1 && roster.NeedsYou[0].Name == "alice"
	})
	if len(roster.Agents) != 2 || roster.Counts.Waiting != 1 || roster.Counts.Idle != 1 {
		t.Fatalf("roster %+v", roster)
	}
	for _, a := range roster.Agents {
		if a.Name == "web" || a.Role != "reviewer" || a.Harness != "claude" {
			t.Fatalf("roster agent %+v: want alice and bob, role reviewer, harness claude, no web", a)
		}
	}
	var chans struct {
		Channels []web.ChannelRow `json:"channels"`
	}
	meshtest.Until(t, "team in channels", 15*time.Second, func() bool {
		getJSON(t, base, "/api/channels", &chans)
		return len(chans.Channels) == 1 && chans.Channels[0].Seen == 1
	})
	if c := chans.Channels[0]; c.Name != "team" || c.Messages != 1 || len(c.Members) != 1 || c.Members[0] != "local.alice" {
		t.Fatalf("channels %+v", chans.Channels)
	}
	var hist struct {
		Channel  string `json:"channel"`
		Messages []struct {
			ID, Kind, From, FromName, Channel, Text string
			TS                                      int64
		} `json:"messages"`
	}
	if st := getJSON(t, base, "/api/channels/team/history?limit=10", &hist); st != 200 || hist.Channel != "team" || len(hist.Messages) != 1 ||
		hist.Messages[0].Text != "<b>hi</b>" || hist.Messages[0].From != "local.alice" || hist.Messages[0].Kind != "channel" {
		t.Fatalf("history %d %+v", st, hist)
	}
	var dms struct {
		Messages []struct{ From, To, Text, Kind string } `json:"messages"`
	}
	meshtest.Until(t, "the dm", 15*time.Second, func() bool { getJSON(t, base, "/api/dms", &dms); return len(dms.Messages) == 1 })
	if d := dms.Messages[0]; d.From != "local.bob" || d.To != "local.alice" || d.Text != "psst" || d.Kind != "dm" {
		t.Fatalf("dms %+v", dms)
	}

	// Bad input: a named 400, never a crash.
	var e struct{ Error, Reason string }
	if st := getJSON(t, base, "/api/channels/team/history?limit=abc", &e); st != 400 || e.Error != "bad-limit" || !strings.Contains(e.Reason, `"abc"`) {
		t.Fatalf("bad limit: %d %+v", st, e)
	}
	if st := getJSON(t, base, "/api/channels/a..b/history", &e); st != 400 || e.Error != "bad-channel" {
		t.Fatalf("bad channel: %d %+v", st, e)
	}
	if st := getJSON(t, base, "/nope", &struct{}{}); st != 404 {
		t.Fatalf("unknown route: %d", st)
	}
}

func TestFeedResumesWithLastEventID(t *testing.T) {
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	base := startWeb(t, url)
	ctx := t.Context()

	feed := openFeed(t, base, "")
	if ev := next(t, feed, "snapshot"); ev.typ != "snapshot" {
		t.Fatalf("first event %+v, want snapshot", ev)
	}
	if _, err := alice.Post(ctx, "team", client.Text("one")); err != nil {
		t.Fatal(err)
	}
	first := nextMessage(t, feed, "message one")
	var ev struct {
		Seq     uint64
		Message struct{ Text, From, Channel string }
	}
	if err := json.Unmarshal([]byte(first.data), &ev); err != nil || ev.Message.Text != "one" || ev.Message.From != "local.alice" ||
		ev.Message.Channel != "team" || strconv.FormatUint(ev.Seq, 10) != first.id {
		t.Fatalf("message event %+v (%v)", first, err)
	}
	// Two more while "disconnected"; a feed resumed after "one" gets exactly them.
	for _, s := range []string{"two", "three"} {
		if _, err := alice.Post(ctx, "team", client.Text(s)); err != nil {
			t.Fatal(err)
		}
	}
	nextMessage(t, feed, "two")
	nextMessage(t, feed, "three")
	resumed := openFeed(t, base, first.id)
	var got []string
	for len(got) < 2 {
		m := nextMessage(t, resumed, "resumed")
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Message.Text)
	}
	if got[0] != "two" || got[1] != "three" {
		t.Fatalf("resumed %v, want [two three]", got)
	}
	// A Last-Event-ID that is not a number is a named 400.
	var e struct{ Error string }
	req, _ := http.NewRequest("GET", strings.TrimSuffix(base, "/")+"/feed", nil)
	req.Header.Set("Last-Event-ID", "x")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_ = json.NewDecoder(res.Body).Decode(&e)
	if res.StatusCode != 400 || e.Error != "bad-last-event-id" {
		t.Fatalf("bad Last-Event-ID: %d %+v", res.StatusCode, e)
	}
}

func TestPostReachesPeers(t *testing.T) {
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	base := startWeb(t, url)
	post := func(body, origin string) (int, string) {
		req, _ := http.NewRequest("POST", strings.TrimSuffix(base, "/")+"/api/post", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct{ Error string }
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, e.Error
	}
	if st, code := post(`{"channel":"team","text":"from the page"}`, ""); st != 200 {
		t.Fatalf("post: %d %s", st, code)
	}
	if st, code := post(`{"to":"local.alice","text":"dm from the page"}`, ""); st != 200 {
		t.Fatalf("dm: %d %s", st, code)
	}
	want := map[string]protocol.DeliveryKind{"from the page": protocol.DeliveryChannel, "dm from the page": protocol.DeliveryDM}
	for len(want) > 0 {
		select {
		case in := <-alice.Messages():
			if k, ok := want[in.Text()]; ok && k == in.Kind {
				delete(want, in.Text())
			}
			_ = in.Ack()
		case <-time.After(15 * time.Second):
			t.Fatalf("alice did not get %v", want)
		}
	}
	for _, c := range []struct{ body, origin, code string }{
		{`{"channel":"team","text":"x"}`, "http://evil.example", "cross-origin"},
		{`{"channel":"team","to":"local.alice","text":"x"}`, "", "bad-target"},
		{`{"channel":"team","text":"  "}`, "", "empty-text"},
		{`{"channel":"a b","text":"x"}`, "", "bad-channel"},
		{`{"to":"alice","text":"x"}`, "", "bad-to"},
		{`{"channel":"team","text":"x","extra":1}`, "", "bad-body"},
	} {
		if st, code := post(c.body, c.origin); code != c.code || st < 400 {
			t.Errorf("post %s from %q: %d %s, want %s", c.body, c.origin, st, code, c.code)
		}
	}
}

func TestRemoteNeedsToken(t *testing.T) {
	url := openMesh(t)
	page := startWeb(t, url, "--allow-remote", "--host", "127.0.0.1")
	i := strings.Index(page, "?token=")
	if i < 0 || len(page[i+7:]) != 48 {
		t.Fatalf("page URL %q carries no token", page)
	}
	base := page[:i]
	var e struct{ Error string }
	if st := getJSON(t, base, "/api/meta", &e); st != 401 || e.Error != "token" {
		t.Fatalf("no token: %d %+v", st, e)
	}
	if st := getJSON(t, base, "/api/meta?token=wrong", &e); st != 401 {
		t.Fatalf("wrong token: %d", st)
	}
	var meta web.Meta
	if st := getJSON(t, base, "/api/meta"+page[i:], &meta); st != 200 || meta.Space != space {
		t.Fatalf("with token: %d %+v", st, meta)
	}
}
