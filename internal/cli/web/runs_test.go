package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// waitingRun starts a local driver of a run that waits at /checkpoint:approve#0 and logs
// the answer; it answers the run id and a channel the drive's end is sent on.
func waitingRun(t *testing.T, url string) (jetstream.JetStream, string, <-chan rundriver.Outcome, func() []string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	prog, run, err := rundriver.Prepare("const a = await checkpoint(\"approve\", \"Ship <b>1.2</b>?\");\nlog(\"answer \" + a.value + \" by \" + a.by);\n")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	waiting := make(chan struct{}, 1)
	cfg := rundriver.Config{JS: js, Space: space,
		Log:          func(_, l string) { mu.Lock(); logs = append(logs, l); mu.Unlock() },
		OnCheckpoint: func(string, string) { waiting <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan rundriver.Outcome, 1), make(chan struct{})
	go func() {
		defer close(finished)
		out, err := rundriver.Start(ctx, cfg, prog, run, "approve.cotal.js")
		if err != nil {
			t.Errorf("drive: %v", err)
		}
		done <- out
	}()
	t.Cleanup(func() { cancel(); <-finished })
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never waited at its checkpoint")
	}
	return js, run, done, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), logs...) }
}

func postJSON(t *testing.T, base, path, origin string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// answers counts the answer records filed for the run's checkpoint.
func answers(t *testing.T, js jetstream.JetStream, run string) int {
	t.Helper()
	sp := &runstore.Space{JS: js, Name: space}
	as, err := sp.Answers(t.Context(), run, "/checkpoint:approve#0")
	if err != nil {
		t.Fatal(err)
	}
	return len(as)
}

// A checkpoint waiting for a person is listed by the dashboard (runs, pending, the
// journal) and answered through it over real HTTP with the checks cotal run answer
// makes; the run's driver settles it with that answer, recorded as the person the
// dashboard runs as. A cross-site page, a step not reached, a value that is not JSON and
// a second answer are refused, and none of them files anything.
func TestCheckpointAnsweredFromTheDashboard(t *testing.T) {
	url := openMesh(t)
	js, run, done, logs := waitingRun(t, url)
	base := startWeb(t, url)

	var runs web.RunList
	if st := getJSON(t, base, "/api/runs", &runs); st != 200 || len(runs.Runs) != 1 || runs.Runs[0].RunID != run || runs.Runs[0].State != "running" {
		t.Fatalf("runs %d %+v", st, runs)
	}
	var pend web.PauseList
	if st := getJSON(t, base, "/api/runs/pending", &pend); st != 200 || len(pend.Pending) != 1 ||
		pend.Pending[0].Step != "/checkpoint:approve#0" || pend.Pending[0].Asks != "Ship <b>1.2</b>?" || pend.Pending[0].Deadline == 0 {
		t.Fatalf("pending %d %+v", st, pend)
	}
	var view runstore.RunView
	if st := getJSON(t, base, "/api/runs/"+run+"/journal", &view); st != 200 || len(view.Journal) < 2 || view.Journal[0].Kind != "activation" {
		t.Fatalf("journal %d %+v", st, view)
	}
	var bad map[string]any
	if st := getJSON(t, base, "/api/runs/run-00000000000000000000000000000000/journal", &bad); st != 404 {
		t.Fatalf("a run the space has no record of: %d %v", st, bad)
	}
	if st := getJSON(t, base, "/api/runs/not.an.id/journal", &bad); st != 400 {
		t.Fatalf("a malformed run id: %d %v", st, bad)
	}

	path := "/api/runs/" + run + "/answer"
	for _, c := range []struct {
		name, origin, body string
		status             int
		reason             string
	}{
		{"cross-site", "http://evil.example", `{"step":"/checkpoint:approve#0","value":"yes"}`, 403, "own page"},
		{"not reached", "", `{"step":"/checkpoint:nope#0","value":"yes"}`, 404, "has not reached it"},
		{"not json", "", `{"step":"/checkpoint:approve#0","value":yes}`, 400, "value as JSON"},
		{"unknown field", "", `{"step":"/checkpoint:approve#0","value":"yes","by":"mallory"}`, 400, "unknown field"},
		{"no value", "", `{"step":"/checkpoint:approve#0"}`, 400, "JSON value"},
	} {
		st, out := postJSON(t, base, path, c.origin, []byte(c.body))
		if st != c.status || !strings.Contains(out["reason"].(string), c.reason) {
			t.Errorf("%s: %d %v, want %d naming %q", c.name, st, out, c.status, c.reason)
		}
	}
	// A DNS-rebound page names another host: refused before anything is read.
	req, err := http.NewRequestWithContext(t.Context(), "POST", strings.TrimSuffix(base, "/")+path,
		strings.NewReader(`{"step":"/checkpoint:approve#0","value":"yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host: %v %v, want 421", res, err)
	} else {
		res.Body.Close()
	}
	if n := answers(t, js, run); n != 0 {
		t.Fatalf("%d answers filed by refused requests", n)
	}

	st, out := postJSON(t, base, path, base, []byte(`{"step":"/checkpoint:approve#0","value":"yes"}`))
	// The driver minted the checkpoint on the plane, so the answer resumes it there.
	if st != 200 || len(out["answerId"].(string)) != 43 || out["settle"] != "resumed" {
		t.Fatalf("answer: %d %v", st, out)
	}
	select {
	case o := <-done:
		if o.State != runstore.StateCompleted {
			t.Fatalf("run ended %+v", o)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not complete after the dashboard answered")
	}
	who, _ := cmdutil.OperatorIdentity()
	if l := logs(); len(l) != 1 || l[0] != "answer yes by "+who {
		t.Fatalf("logs %q, want the answer by %s", l, who)
	}
	st, out = postJSON(t, base, path, "", []byte(`{"step":"/checkpoint:approve#0","value":"no"}`))
	if st != 409 || !strings.Contains(out["reason"].(string), "settled already") {
		t.Fatalf("a second answer: %d %v", st, out)
	}
	if n := answers(t, js, run); n != 1 {
		t.Fatalf("%d answers, want the one", n)
	}
	meshtest.Until(t, "the journal shows the checkpoint resolved", 15*time.Second, func() bool {
		getJSON(t, base, "/api/runs/"+run+"/journal", &view)
		last := view.Journal[len(view.Journal)-1]
		return last.Step == "/checkpoint:approve#0" && last.Outcome == "resolved" && len(view.Pending) == 0
	})
}

// In a browser: the waiting checkpoint shows in NEEDS YOU with what it asks (as text,
// never markup), an answer that is not JSON is refused on the page, and a JSON answer
// typed into its row settles the run.
func TestCheckpointAnsweredInBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no chromium binary on PATH (chromium, chromium-browser, google-chrome, headless-shell); .ci/run installs Debian's chromium")
	}
	url := openMesh(t)
	_, run, done, logs := waitingRun(t, url)
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

	row := `#needs li.pause[data-run="` + run + `"]`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(row),
		chromedp.WaitVisible(`#runs li[data-run="`+run+`"]`),
	); err != nil {
		t.Fatal(err)
	}
	asks, err := chromedp.Run(bctx, chromedp.Text(row+` .title`))
	if err != nil {
		t.Fatal(err)
	}
	bold, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#needs b').length`))
	if err != nil {
		t.Fatal(err)
	}
	if asks != "Ship <b>1.2</b>?" || bold != 0 {
		t.Fatalf("NEEDS YOU shows %q (%d bold elements), want the prompt as text", asks, bold)
	}
	// A bare word is not JSON: the page says so and sends nothing.
	if err := chromedp.Do(bctx, chromedp.SendKeys(row+` input`, `yes`), chromedp.Click(row+` button`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('`+row+` .note').textContent.includes('not JSON')`)); err != nil {
		t.Fatalf("a bare word was not refused on the page: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.SetValue(row+` input`, `"yes"`), chromedp.Click(row+` button`)); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.State != runstore.StateCompleted {
			t.Fatalf("run ended %+v", o)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not complete after the page answered")
	}
	if l := logs(); len(l) != 1 || !strings.HasPrefix(l[0], "answer yes by ") {
		t.Fatalf("logs %q", l)
	}
	if err := chromedp.Do(bctx, chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("the answered checkpoint stays in NEEDS YOU: %v", err)
	}
}
