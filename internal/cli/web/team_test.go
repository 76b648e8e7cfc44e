package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
)

// boardAgent connects as a fresh agent credential of name on the mesh, as cotal mcp does,
// with its task board.
func boardAgent(t *testing.T, m *meshtest.Mesh, name string) (*nats.Conn, *taskboard.Board) {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(t.Context(), m.Provisioner(space), space, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	nc := m.Connect(m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		Subscribe: []string{"general"}, AllowPublish: []string{"general"}}))
	b, err := taskboard.Connect(t.Context(), nc, space, p, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return nc, b
}

// nextOf skips feed events up to the next one of type typ.
func nextOf(t *testing.T, ch <-chan sseEvent, typ, what string) meshview.Event {
	t.Helper()
	for {
		if ev := next(t, ch, what); ev.typ == typ {
			var out meshview.Event
			if err := json.Unmarshal([]byte(ev.data), &out); err != nil {
				t.Fatalf("%s: %v in %s", what, err, ev.data)
			}
			return out
		}
	}
}

// On an authenticated mesh (the dashboard's minted admin credential, agents on their own),
// a task created and claimed through the board shows with its holder in /api/tasks, a
// file claim in /api/claims, and each later change arrives live on the feed; a title
// carrying markup and a terminal escape comes back as data, byte for byte, in JSON.
func TestTasksAndClaimsOnTheDashboard(t *testing.T) {
	root, m := authProject(t)
	anc, alice := boardAgent(t, m, "alice")
	_, bob := boardAgent(t, m, "bob")
	title := `fix <script>document.title="owned"</script> ` + "\x1b[2J\x1b]0;pwned\x07"
	task, err := alice.Create(t.Context(), taskboard.TaskRow{Title: title, Role: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	ajs, _ := jetstream.New(anc)
	as := &claims.Store{JS: ajs, Space: space, Holder: alice.Me(), Name: "alice"}
	if _, err := as.Claim(t.Context(), claims.Request{Paths: []string{"internal/cli/web"}, TTL: time.Hour, Exclusive: true, Reason: "the <b>panel</b>"}); err != nil {
		t.Fatal(err)
	}

	base := launchWeb(t, root, nil, "--server", m.URL)
	var ts web.Tasks
	if st := getJSON(t, base, "/api/tasks", &ts); st != 200 || ts.ReadError != "" || len(ts.Tasks) != 1 {
		t.Fatalf("/api/tasks: %d %+v", st, ts)
	}
	if got := ts.Tasks[0]; got.ID != task.ID || got.Title != title || got.Holder != "local.bob" || got.Status != taskboard.Claimed ||
		got.Role != "dev" || got.Creator != "local.alice" || got.Updated == 0 || got.LeaseUntil == 0 {
		t.Fatalf("task = %+v", got)
	}
	var cs web.Claims
	if st := getJSON(t, base, "/api/claims", &cs); st != 200 || len(cs.Claims) != 1 {
		t.Fatalf("/api/claims: %d %+v", st, cs)
	}
	if c := cs.Claims[0]; c.Path != "internal/cli/web" || c.Holder != "local.alice" || !c.Exclusive || c.Reason != "the <b>panel</b>" ||
		c.Since == 0 || c.Expires <= c.Since {
		t.Fatalf("claim = %+v", c)
	}

	// The filter, and its refusal.
	if getJSON(t, base, "/api/tasks?status=open", &ts); len(ts.Tasks) != 0 {
		t.Fatalf("open tasks = %+v", ts.Tasks)
	}
	var e struct{ Error, Reason string }
	if st := getJSON(t, base, "/api/tasks?status=finished", &e); st != 400 || e.Error != "bad-status" || !strings.Contains(e.Reason, "claimed") {
		t.Fatalf("status=finished: %d %+v", st, e)
	}

	// Live: a status change, a new task, a release.
	feed := openFeed(t, base, "")
	if ev := next(t, feed, "snapshot"); ev.typ != "snapshot" {
		t.Fatalf("first event %+v", ev)
	}
	if _, err := bob.Update(t.Context(), task.ID, taskboard.Working, "halfway"); err != nil {
		t.Fatal(err)
	}
	ev := nextOf(t, feed, meshview.EventTask, "the update")
	if ev.Task == nil || ev.Task.ID != task.ID || ev.Task.Status != taskboard.Working || ev.Task.Note != "halfway" || ev.Task.Holder != "local.bob" {
		t.Fatalf("update event = %+v", ev.Task)
	}
	second, err := alice.Create(t.Context(), taskboard.TaskRow{Title: "write the docs"})
	if err != nil {
		t.Fatal(err)
	}
	if ev = nextOf(t, feed, meshview.EventTask, "the new task"); ev.Task.ID != second.ID || ev.Task.Status != taskboard.Open {
		t.Fatalf("new task event = %+v", ev.Task)
	}
	if _, _, err := as.Release(t.Context(), nil, true); err != nil {
		t.Fatal(err)
	}
	if ev = nextOf(t, feed, meshview.EventClaim, "the release"); !ev.Gone || ev.Claim.Path != "internal/cli/web" {
		t.Fatalf("release event = %+v", ev)
	}
	if getJSON(t, base, "/api/claims", &cs); len(cs.Claims) != 0 {
		t.Fatalf("claims after release = %+v", cs.Claims)
	}
	if getJSON(t, base, "/api/tasks?status=open", &ts); len(ts.Tasks) != 1 || ts.Tasks[0].ID != second.ID {
		t.Fatalf("open tasks = %+v", ts.Tasks)
	}

	// The same door rules as the rest of the API: a rebound page's Host is refused.
	req, _ := http.NewRequest("GET", strings.TrimSuffix(base, "/")+"/api/tasks", nil)
	req.Host = "evil.example:80"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("foreign Host: %d", res.StatusCode)
	}
}

// TestTeamPanelsInBrowser: the Tasks and File claims panels show who holds what in a real
// browser, follow changes live, filter by status, and show a hostile title as text: no
// markup runs and a terminal escape is a visible mark, not a control character.
func TestTeamPanelsInBrowser(t *testing.T) {
	bctx := browser(t)
	root, m := authProject(t)
	anc, alice := boardAgent(t, m, "alice")
	_, bob := boardAgent(t, m, "bob")
	const hostile = `fix <img src=x onerror="document.title='pwned'"> now`
	task, err := alice.Create(t.Context(), taskboard.TaskRow{Title: hostile + "\x1b[2J", Role: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	base := launchWeb(t, root, nil, "--server", m.URL)
	sel := `#tasks li[data-id="` + task.ID + `"]`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(sel+`[data-status="claimed"]`),
	); err != nil {
		t.Fatalf("the task is not on the page: %v", err)
	}
	row, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => { const li = document.querySelector('`+sel+`');
		return li.querySelector('.title').textContent + '|' + li.querySelector('.holder').textContent; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(row, hostile+"\ufffd[2J|") || !strings.Contains(row, "held by local.bob") || !strings.Contains(row, task.ID) || !strings.Contains(row, "role dev") {
		t.Fatalf("task row %q", row)
	}

	// Live: bob blocks it, alice claims a path; a filter on open hides the blocked task.
	if _, err := bob.Update(t.Context(), task.ID, taskboard.Blocked, "needs a review"); err != nil {
		t.Fatal(err)
	}
	ajs, _ := jetstream.New(anc)
	as := &claims.Store{JS: ajs, Space: space, Holder: alice.Me(), Name: "alice"}
	if _, err := as.Claim(t.Context(), claims.Request{Paths: []string{"docs/web.md"}, TTL: time.Hour, Reason: "docs"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(sel+`[data-status="blocked"]`),
		chromedp.WaitVisible(`#claims li[data-path="docs/web.md"][data-holder="local.alice"]`),
	); err != nil {
		t.Fatalf("live changes: %v", err)
	}
	claim, err := chromedp.Run(bctx, chromedp.Text(`#claims li[data-path="docs/web.md"]`))
	if err != nil || !strings.Contains(claim, "shared") || !strings.Contains(claim, "alice (local.alice)") || !strings.Contains(claim, "docs") {
		t.Fatalf("claim row %q (%v)", claim, err)
	}
	if err := chromedp.Do(bctx, chromedp.SetValue(`#task-filter`, "open")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById('task-filter').dispatchEvent(new Event('change'))`)); err != nil {
		t.Fatal(err)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#tasks li[data-id]').length`)); err != nil || n != 0 {
		t.Fatalf("filter open shows %d tasks (%v)", n, err)
	}
	imgs, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('aside img').length`))
	if err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(bctx, chromedp.Title()); err != nil || imgs != 0 || title == "pwned" {
		t.Fatalf("a task title became markup: %d img, title %q (%v)", imgs, title, err)
	}
}
