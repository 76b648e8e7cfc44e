package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// chromium finds a Chromium or Chrome binary; .ci/run installs Debian's chromium.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func TestDashboardInBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no chromium binary on PATH (chromium, chromium-browser, google-chrome, headless-shell); .ci/run installs Debian's chromium")
	}
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	bob := peer(t, url, "bob", "team")
	ctx := t.Context()
	if err := alice.SetStatus(ctx, protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	if err := bob.SetStatus(ctx, protocol.StatusWorking); err != nil {
		t.Fatal(err)
	}
	base := startWeb(t, url)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	bctx, cancelGuard := context.WithTimeout(bctx, 90*time.Second) // a hang guard only
	defer cancelGuard()

	// The roster shows each peer's state (as data-state, drawn as shape and colour).
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(`#roster li[data-id="local.alice"][data-state="waiting"]`),
		chromedp.WaitVisible(`#roster li[data-id="local.bob"][data-state="working"]`),
		chromedp.WaitVisible(`#needs li[data-id="local.alice"]`),
	); err != nil {
		t.Fatalf("roster: %v", err)
	}
	if waitingTile, err := chromedp.Run(bctx, chromedp.Text(`#n-waiting`)); err != nil || waitingTile != "1" {
		t.Fatalf("waiting tile %q (%v), want 1", waitingTile, err)
	}

	// A peer's message appears on the page, as text: markup a peer wrote is not markup.
	const hostile = `hello from alice <img src=x onerror="document.title='pwned'">`
	if _, err := alice.Post(ctx, "team", client.Text(hostile)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
		`[...document.querySelectorAll('#messages .msg .text')].some(e => e.textContent === `+jsString(hostile)+`)`)); err != nil {
		t.Fatalf("alice's message not on the page: %v", err)
	}
	imgs, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages img').length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 0 || title == "pwned" {
		t.Fatalf("peer text became markup: %d img elements, title %q", imgs, title)
	}

	// A post typed on the page reaches a peer.
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(`#channels li[data-channel="team"]`),
		chromedp.Click(`#channels li[data-channel="team"]`),
		chromedp.SetValue(`#post-target`, "c:team"),
		chromedp.SendKeys(`#post-text`, "typed on the page"),
		chromedp.Click(`#post-send`),
	); err != nil {
		t.Fatalf("post from the page: %v", err)
	}
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case in := <-bob.Messages():
			got = in.Text() == "typed on the page" && in.Kind == protocol.DeliveryChannel && in.Subject.Channel == "team"
		case <-deadline:
			t.Fatal("bob did not get the post typed on the page")
		}
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
		`[...document.querySelectorAll('#messages .msg .text')].some(e => e.textContent === "typed on the page")`)); err != nil {
		t.Fatalf("the page's own post did not come back through the feed: %v", err)
	}

	// The graph draws the agents, the channel and their memberships.
	if err := chromedp.Do(bctx, chromedp.Click(`#show-graph`), chromedp.WaitVisible(`#graph circle.hub`)); err != nil {
		t.Fatalf("graph: %v", err)
	}
	edges, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#graph line').length`))
	if err != nil {
		t.Fatalf("graph: %v", err)
	}
	if edges < 1 {
		t.Fatalf("graph has %d membership edges, want alice–team at least", edges)
	}

	if err := chromedp.Do(bctx, chromedp.Click(`#channels li[data-channel="team"]`)); err != nil {
		t.Fatalf("back to the channel: %v", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100 is a PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	if dir := os.Getenv("COTAL_SCREENSHOT_DIR"); dir != "" { // keep one past the test, on request
		_ = os.WriteFile(filepath.Join(dir, "dashboard.png"), png, 0o600)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// browser starts headless Chromium for one test; it skips without one.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium()
	if exe == "" {
		t.Skip("no chromium binary on PATH (chromium, chromium-browser, google-chrome, headless-shell); .ci/run installs Debian's chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	bctx, cancelGuard := context.WithTimeout(bctx, 90*time.Second) // a hang guard only
	t.Cleanup(cancelGuard)
	return bctx
}

// TestRemoteDashboardInBrowser: with --allow-remote, the printed URL opens the whole page
// in a real browser (scripts, styles, the API and the live feed all carry the token as a
// cookie), the token leaves the address bar, and no script can read it.
func TestRemoteDashboardInBrowser(t *testing.T) {
	bctx := browser(t)
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	bob := peer(t, url, "bob", "team")
	if err := alice.SetStatus(t.Context(), protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Post(t.Context(), "team", client.Text("said before the dashboard started")); err != nil {
		t.Fatal(err)
	}
	page := startWeb(t, url, "--allow-remote", "--host", "127.0.0.1")
	if !strings.Contains(page, "?token=") {
		t.Fatalf("page URL %q carries no token", page)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible(`#roster li[data-id="local.alice"][data-state="waiting"]`),
		chromedp.WaitVisible(`#needs li[data-id="local.alice"]`),
	); err != nil {
		t.Fatalf("the page did not load: %v", err)
	}
	// The Monitor shows recent messages at load, not only live ones.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
		`[...document.querySelectorAll('#messages .msg .text')].some(e => e.textContent === "said before the dashboard started")`)); err != nil {
		t.Fatalf("the Monitor does not show the message sent before the dashboard started: %v", err)
	}
	// The stylesheet applied (the header is a flex row), and the feed is live.
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('header')).display`))
	if err != nil || shown != "flex" {
		t.Fatalf("style.css not applied: header display %q (%v)", shown, err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById('live').textContent === 'live'`)); err != nil {
		t.Fatalf("the live feed did not open: %v", err)
	}
	loc, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + '|' + document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, "token") || strings.Contains(loc, page[strings.Index(page, "?token=")+7:]) {
		t.Fatalf("the token is still visible to the page: %q", loc)
	}
	// A live message arrives, and a post typed on the page reaches bob.
	if _, err := alice.Post(t.Context(), "team", client.Text("live through the cookie")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
		`[...document.querySelectorAll('#messages .msg .text')].some(e => e.textContent === "live through the cookie")`)); err != nil {
		t.Fatalf("the live message is not on the page: %v", err)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(`#channels li[data-channel="team"]`),
		chromedp.Click(`#channels li[data-channel="team"]`),
		chromedp.SetValue(`#post-target`, "c:team"),
		chromedp.SendKeys(`#post-text`, "typed on the remote page"),
		chromedp.Click(`#post-send`),
	); err != nil {
		t.Fatalf("post from the page: %v", err)
	}
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case in := <-bob.Messages():
			got = in.Text() == "typed on the remote page"
			_ = in.Ack()
		case <-deadline:
			t.Fatal("bob did not get the post typed on the page")
		}
	}
}
