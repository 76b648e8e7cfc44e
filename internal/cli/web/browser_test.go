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
