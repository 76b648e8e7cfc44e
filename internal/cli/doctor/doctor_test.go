package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

func TestNewCmdDoctorFlags(t *testing.T) {
	for _, c := range []struct {
		args             []string
		auth, fix, jsonF bool
		space, err       string
	}{
		{args: nil},
		{args: []string{"auth"}, auth: true},
		{args: []string{"auth", "--fix", "--json", "--space", "review"}, auth: true, fix: true, jsonF: true, space: "review"},
		{args: []string{"sideways"}, err: `unknown check group "sideways"`},
		{args: []string{"auth", "again"}, err: "accepts at most 1 arg"},
		{args: []string{"--space", ""}, err: "a space name is required"},
	} {
		var got *Options
		ios, _, _, _ := iostreams.Test()
		cmd := NewCmdDoctor(&cmdutil.Factory{IO: ios}, "v1", func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || got.Auth != c.auth || got.Fix != c.fix || got.JSON != c.jsonF || got.Space != c.space || got.Version != "v1" {
			t.Errorf("%v: opts %+v, err %v", c.args, got, err)
		}
	}
}

// project makes a project whose mesh record names a real operator-mode broker trusting the
// project's own chain, with this test's process standing in for the broker process.
func project(t *testing.T, space string) (*workspace.Project, *meshtest.Mesh) {
	t.Helper()
	root := t.TempDir()
	proj := &workspace.Project{Root: root}
	if err := os.MkdirAll(proj.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Space(space); err != nil {
		t.Fatal(err)
	}
	m := meshtest.Serve(t, chain)
	if err := proj.WriteMesh(&workspace.Mesh{Server: m.URL, Mode: workspace.ModeAuth, Spaces: []string{space},
		StoreDir: filepath.Join(proj.Dir(), "nats"), Root: root, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := workspace.WritePidfile(proj.PidFile(), os.Getpid()); err != nil {
		t.Fatal(err)
	}
	return proj, m
}

func testDoctor(t *testing.T, proj *workspace.Project, now func() time.Time) *doctor {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	opts := &Options{IO: ios, Getwd: func() (string, error) { return proj.Root, nil },
		Getenv: func(string) string { return "" }, Executable: os.Executable, Version: "test", Now: now,
		HTTP: &http.Client{Timeout: 5 * time.Second}}
	d, err := newDoctor(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !d.findProject() || !d.up {
		t.Fatalf("project not found or its mesh not up: %+v", d.checks)
	}
	return d
}

// The clock check asks the broker its time as the system account and judges this
// machine's clock (injected) against it: in step, a few seconds off, a minute off.
func TestClockSkew(t *testing.T) {
	proj, _ := project(t, "main")
	for _, c := range []struct {
		offset time.Duration
		status string
		msg    string
	}{
		{0, StatusOK, "within 2s of the broker's"},
		{-5 * time.Second, StatusWarn, "behind the broker's"},
		{time.Minute, StatusFail, "ahead of the broker's: credentials and bearers are judged on the broker's clock"},
	} {
		d := testDoctor(t, proj, func() time.Time { return time.Now().Add(c.offset) })
		d.checkClock(t.Context())
		if len(d.checks) != 1 || d.checks[0].Check != "clock" || d.checks[0].Status != c.status || !strings.Contains(d.checks[0].Message, c.msg) {
			t.Errorf("offset %s: checks %+v; want one clock check %s saying %q", c.offset, d.checks, c.status, c.msg)
		}
	}
}

// A user-auth space's IdP is asked for its keys: answering, failing, gone.
func TestIdPReachability(t *testing.T) {
	proj, m := project(t, "main")
	status := http.StatusOK
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer idp.Close()
	if _, err := authsvc.Enable(m.Chain, "main", idp.URL, ""); err != nil {
		t.Fatal(err)
	}
	check := func(want, msg string) {
		t.Helper()
		d := testDoctor(t, proj, time.Now)
		d.checkIdP("main")
		if len(d.checks) != 1 || d.checks[0].Status != want || !strings.Contains(d.checks[0].Message, msg) {
			t.Fatalf("checks %+v; want one idp check %s saying %q", d.checks, want, msg)
		}
	}
	check(StatusOK, "answers at "+idp.URL+"/jwks")
	status = http.StatusBadGateway
	check(StatusFail, "the IdP answers 502 Bad Gateway")
	idp.Close()
	check(StatusFail, "the IdP does not answer at "+idp.URL+"/jwks")
}

// A creds file's expiry is judged on the injected clock: a day ahead it warns, past it fails
// and names the mint that replaces it; doctor without --fix leaves the file as it was.
func TestCredsExpiry(t *testing.T) {
	proj, m := project(t, "main")
	start := time.Now()
	creds := m.Mint("main", trust.UserSpec{Name: "watcher", Profile: trust.ProfileObserver,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "watcher"}, ExpiresIn: 48 * time.Hour})
	path := filepath.Join(proj.CredsDir("main"), "watcher.creds")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at     time.Duration
		status string
		msg    string
	}{
		{time.Hour, StatusOK, "mode 0600, expires "},
		{30 * time.Hour, StatusWarn, "within a day"},
		{49 * time.Hour, StatusFail, "expired "},
	} {
		d := testDoctor(t, proj, func() time.Time { return start.Add(c.at) })
		d.checkCreds(path)
		if len(d.checks) != 1 || d.checks[0].Status != c.status || !strings.Contains(d.checks[0].Message, c.msg) {
			t.Errorf("at +%s: checks %+v; want %s saying %q", c.at, d.checks, c.status, c.msg)
		}
		if c.status != StatusOK && !strings.HasPrefix(d.checks[0].Next, "cotal mint ") {
			t.Errorf("at +%s: next %q; want the cotal mint that replaces it", c.at, d.checks[0].Next)
		}
	}
}

// The login check reads this machine's session at a user-auth space's IdP on the injected
// clock: none, valid, within a day of expiry, expired; each wrong one names cotal login.
func TestLoginSession(t *testing.T) {
	proj, m := project(t, "main")
	const idp = "http://127.0.0.1:9/api/auth" // never dialled: the check reads the session file
	if _, err := authsvc.Enable(m.Chain, "main", idp, ""); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now()
	check := func(at time.Duration, want, msg string) {
		t.Helper()
		d := testDoctor(t, proj, func() time.Time { return start.Add(at) })
		d.opts.LoginDir = func() (string, error) { return dir, nil }
		d.checkLogin("main")
		if len(d.checks) != 1 || d.checks[0].Status != want || !strings.Contains(d.checks[0].Message, msg) {
			t.Fatalf("at +%s: checks %+v; want one login check %s saying %q", at, d.checks, want, msg)
		}
		if want != StatusOK && d.checks[0].Next != "cotal login --idp "+idp {
			t.Fatalf("at +%s: next %q; want cotal login --idp %s", at, d.checks[0].Next, idp)
		}
	}
	check(0, StatusWarn, "no session at "+idp)
	if err := (devicelogin.Store{Dir: dir}).SaveRef(idp, &devicelogin.RefSession{Token: "t", Sub: "alice", ExpiresAt: start.Add(48 * time.Hour).Unix()}); err != nil {
		t.Fatal(err)
	}
	check(time.Hour, StatusOK, "signed in to "+idp+" until ")
	check(30*time.Hour, StatusWarn, "within a day")
	check(49*time.Hour, StatusWarn, "expired ")
}

// Leases held by processes gone from this host are warned about: the delivery lease (it
// lapses by its TTL) and this host's manager lease (the next manager takes it over). The
// rows are written as a daemon that was SIGKILLed leaves them.
func TestStaleLeases(t *testing.T) {
	proj, m := project(t, "main")
	ctx := t.Context()
	js, err := jetstream.New(m.Connect(m.Mint("main", meshtest.ProvisionerSpec("op"))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	gone := exec.Command(os.Args[0], "-test.run=^$") // a process that has exited
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pid := gone.Process.Pid
	host, _ := os.Hostname()
	put := func(bucket, key string, row any) {
		t.Helper()
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(row)
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put(protocol.BucketDelivery("main"), protocol.LeaseKey, map[string]any{"holder": "local.cotal_delivery", "incarnation": "x",
		"host": host, "pid": pid, "since": time.Now().UnixMilli(), "ready": true})
	put("cotal_manager_main", manager.LeaseKey(manager.InstanceID(host)), manager.LeaseInfo{Holder: "local.manager",
		InstanceID: manager.InstanceID(host), Runtime: "pty", Root: proj.Root, PID: pid, Since: time.Now().UnixMilli(),
		Run: "r", Host: host, Start: "0"})

	d := testDoctor(t, proj, time.Now)
	f := &cmdutil.Factory{Getwd: d.opts.Getwd, Getenv: d.opts.Getenv}
	d.opts.ConnectOperator = f.ConnectOperator
	var ep *client.Endpoint
	d.checkLease(ctx, "main", &ep)
	if ep != nil {
		ep.Close()
	}
	want := map[string]string{
		"delivery lease of main": fmt.Sprintf("held by pid %d on this host, which is gone", pid),
		"manager lease of main":  fmt.Sprintf("held by manager pid %d on this host, which is gone", pid),
	}
	if len(d.checks) != 2 {
		t.Fatalf("checks %+v; want the two leases", d.checks)
	}
	for _, c := range d.checks {
		if c.Status != StatusWarn || !strings.Contains(c.Message, want[c.Subject]) {
			t.Errorf("check %+v; want a warning saying %q", c, want[c.Subject])
		}
	}
}
