package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// meshWait bounds each question doctor asks the mesh.
const meshWait = 10 * time.Second

// Clock skew against the broker that doctor warns about, and that it calls wrong:
// credentials and bearers are judged on the broker's clock.
const (
	skewWarn = 2 * time.Second
	skewFail = 30 * time.Second
)

// run performs the checks of the subset asked.
func (d *doctor) run(ctx context.Context) {
	found := d.findProject()
	if !d.opts.Auth { // the version lines first, before what finding the project said
		said := d.checks
		d.checks = nil
		d.checkVersion()
		d.checks = append(d.checks, said...)
	}
	if !found {
		return
	}
	d.checkTrust()
	d.checkFiles()
	if !d.opts.Auth {
		d.checkPidfiles()
		d.checkPort()
		d.checkOpenFiles()
	}
	if d.mesh == nil {
		return
	}
	if !d.up {
		next := "cotal up --detach"
		if d.mesh.Mode == workspace.ModeOpen {
			next = "cotal up --open --detach"
		}
		d.add(Check{Check: "mesh", Subject: d.mesh.Server, Status: StatusFail,
			Message: "the broker of " + d.proj.Root + " is not running; the daemon, stream, lease and clock checks are skipped",
			Next:    next})
		for _, s := range d.spaces {
			d.checkIdP(s)
			d.checkLogin(s)
		}
		return
	}
	var ep *client.Endpoint
	for _, s := range d.spaces {
		d.checkDaemons(ctx, s, &ep)
		if !d.opts.Auth {
			d.checkLease(ctx, s, &ep)
			d.checkStreams(ctx, s, &ep)
		}
		d.checkIdP(s)
		d.checkLogin(s)
	}
	if ep != nil {
		ep.Close()
	}
	if !d.opts.Auth {
		d.checkClock(ctx)
	}
}

// connect dials the mesh once, as the project's provisioner (who may read the lease
// buckets and repair streams); a failure is reported by the caller's check.
func (d *doctor) connect(ctx context.Context, space string, ep **client.Endpoint) (*client.Endpoint, error) {
	if *ep != nil && (*ep).Space() == space {
		return *ep, nil
	}
	if *ep != nil {
		(*ep).Close()
		*ep = nil
	}
	t := cmdutil.Target{Server: d.mesh.Server, Space: space, Project: d.proj, Mesh: d.mesh, TLSCA: d.mesh.TLSCA}
	cctx, cancel := context.WithTimeout(ctx, meshWait)
	defer cancel()
	c, err := d.opts.ConnectOperator(cctx, t, trust.ProfileProvisioner)
	if err != nil {
		return nil, err
	}
	*ep = c
	return c, nil
}

// checkDaemons checks each daemon the mesh runs for space: it runs (its pidfile names a
// live process), is held down by cotal down, or is missing. A delivery daemon whose
// pidfile is gone but which still runs and holds the lease gets its pidfile back with --fix.
func (d *doctor) checkDaemons(ctx context.Context, space string, ep **client.Endpoint) {
	if d.mesh.Mode != workspace.ModeAuth {
		return
	}
	_, userAuth := d.userAuth(space)
	for _, k := range workspace.Daemons() {
		switch {
		case k.Component == "auth" && !userAuth, k.Component == "manager" && userAuth:
			continue
		case d.opts.Auth && k.Component != "auth":
			continue
		}
		pidFile := k.PidFile(d.proj, space)
		subject := k.Title + " of " + space
		rec, err := workspace.ReadPidfile(pidFile)
		if err == nil {
			if alive, _ := rec.Alive(); alive {
				d.ok("daemon", subject, fmt.Sprintf("runs (pid %d)", rec.PID))
				continue
			}
		}
		if _, err := os.Stat(workspace.HeldFile(pidFile)); err == nil {
			d.add(Check{Check: "daemon", Subject: subject, Status: StatusWarn,
				Message: "held down by cotal down " + k.Component + "; cotal up starts it again", Next: "cotal up --space " + space})
			continue
		}
		c := Check{Check: "daemon", Subject: subject, Status: StatusFail,
			Message: "not running: " + d.rel(pidFile) + " names no live process; its log is " + d.rel(k.LogFile(d.proj, space)),
			Next:    "cotal down && cotal up --detach"}
		if k.Component == "manager" {
			c.Status = StatusWarn // cotal up --no-manager runs none
			c.Message += " (cotal up --no-manager runs none)"
		}
		if k.Component == "delivery" && errors.Is(err, workspace.ErrNoPidfile) {
			d.adoptDelivery(ctx, space, pidFile, ep, &c)
		}
		d.add(c)
	}
}

// adoptDelivery looks, for a delivery daemon without a pidfile, at who holds the space's
// delivery lease: a holder that is a live `cotal deliver --space <space>` on this host is
// the daemon, which lost its pidfile; --fix writes the pidfile again. The lease row is
// data from the mesh, so the pid it names is adopted only when this machine's own process
// table says that pid runs the delivery daemon of this space, checked again at the fix. A
// holder gone from this host is reported: its lease lapses by its TTL.
func (d *doctor) adoptDelivery(ctx context.Context, space, pidFile string, ep **client.Endpoint, c *Check) {
	e, err := d.connect(ctx, space, ep)
	if err != nil {
		return // the stream check reports the connection
	}
	lctx, cancel := context.WithTimeout(ctx, meshWait)
	defer cancel()
	info, held, err := delivery.ReadLease(lctx, e.JetStream(), space)
	host, _ := os.Hostname()
	if err != nil || !held || info.Host != host || info.PID <= 0 {
		return
	}
	rec, err := workspace.ProcessRecord(info.PID)
	if err != nil {
		c.Message = fmt.Sprintf("not running: no pidfile, and the delivery lease is held by pid %d on this host, which is gone; the lease lapses %s after its last renewal", info.PID, provision.LeaseTTL)
		return
	}
	if !isDeliverOf(rec.PID, space) {
		return
	}
	pid := rec.PID
	c.Message = fmt.Sprintf("runs (pid %d holds the delivery lease) but its pidfile %s is gone: cotal down and cotal status cannot find it", pid, d.rel(pidFile))
	c.Next = ""
	c.fix = func() (string, error) {
		if !isDeliverOf(pid, space) {
			return "", fmt.Errorf("pid %d is no longer the delivery daemon of %s", pid, space)
		}
		if err := workspace.WritePidfile(pidFile, pid); err != nil {
			return "", err
		}
		return fmt.Sprintf("pidfile %s written again for pid %d, the lease holder", d.rel(pidFile), pid), nil
	}
}

// checkLease reads the space's delivery lease on an authenticated mesh: held by a process
// gone from this host, it stalls durable delivery until it lapses; free, no daemon serves.
func (d *doctor) checkLease(ctx context.Context, space string, ep **client.Endpoint) {
	if d.mesh.Mode != workspace.ModeAuth {
		return
	}
	e, err := d.connect(ctx, space, ep)
	if err != nil {
		return // the stream check reports the connection
	}
	lctx, cancel := context.WithTimeout(ctx, meshWait)
	defer cancel()
	info, held, err := delivery.ReadLease(lctx, e.JetStream(), space)
	host, _ := os.Hostname()
	subject := "delivery lease of " + space
	switch {
	case err != nil:
		d.add(Check{Check: "lease", Subject: subject, Status: StatusWarn, Message: "unreadable: " + err.Error()})
	case !held:
		d.add(Check{Check: "lease", Subject: subject, Status: StatusWarn,
			Message: "free: no delivery daemon serves the space, so posts to durable channels wait"})
	case info.Host == host && info.PID > 0:
		if _, err := workspace.ProcessRecord(info.PID); err != nil {
			d.add(Check{Check: "lease", Subject: subject, Status: StatusWarn,
				Message: fmt.Sprintf("held by pid %d on this host, which is gone: durable delivery waits until it lapses, %s after its last renewal", info.PID, provision.LeaseTTL)})
		} else {
			d.ok("lease", subject, fmt.Sprintf("held by pid %d on this host", info.PID))
		}
	default:
		d.ok("lease", subject, fmt.Sprintf("held by pid %d on host %s", info.PID, info.Host))
	}
	if _, userAuth := d.userAuth(space); !userAuth {
		d.checkManagerLease(lctx, e, space, host)
	}
}

// checkManagerLease reads this host's manager lease of the space: held by a manager
// process that is gone, the next manager of this host takes it over (it checks the same),
// but until one starts, spawned seats have no supervisor.
func (d *doctor) checkManagerLease(ctx context.Context, e *client.Endpoint, space, host string) {
	info, held, err := manager.ReadLease(ctx, e.JetStream(), space, host)
	subject := "manager lease of " + space
	switch {
	case err != nil:
		d.add(Check{Check: "lease", Subject: subject, Status: StatusWarn, Message: "unreadable: " + err.Error()})
	case !held:
		// No manager on this host: the daemon check says whether one should run.
	case info.PID > 0 && info.Start != "":
		if alive, err := (workspace.Record{PID: info.PID, Start: info.Start}).Alive(); err == nil && !alive {
			d.add(Check{Check: "lease", Subject: subject, Status: StatusWarn,
				Message: fmt.Sprintf("held by manager pid %d on this host, which is gone: the next manager here takes it over", info.PID),
				Next:    "cotal down && cotal up --detach"})
			return
		}
		d.ok("lease", subject, fmt.Sprintf("held by pid %d on this host", info.PID))
	default:
		d.ok("lease", subject, fmt.Sprintf("held by pid %d on this host", info.PID))
	}
}

// isDeliverOf reports whether pid's command line is a `cotal deliver --space space`; false
// where the command line cannot be read (then doctor does not guess).
func isDeliverOf(pid int, space string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	deliver, spaceOK := false, false
	for i, a := range args {
		if a == "deliver" {
			deliver = true
		}
		if a == "--space" && i+1 < len(args) && args[i+1] == space {
			spaceOK = true
		}
	}
	return deliver && spaceOK
}

// checkStreams compares the space's streams and buckets with what cotal up provisions;
// --fix provisions the space again when every difference is repairable without loss.
func (d *doctor) checkStreams(ctx context.Context, space string, ep **client.Endpoint) {
	e, err := d.connect(ctx, space, ep)
	if err != nil {
		d.add(Check{Check: "streams", Subject: "space " + space, Status: StatusFail, Message: "cannot connect to the mesh: " + err.Error()})
		return
	}
	ictx, cancel := context.WithTimeout(ctx, meshWait)
	defer cancel()
	drifts, err := provision.Inspect(ictx, e.JetStream(), space, provision.Options{})
	if err != nil {
		d.add(Check{Check: "streams", Subject: "space " + space, Status: StatusFail, Message: err.Error()})
		return
	}
	if len(drifts) == 0 {
		d.ok("streams", "space "+space, "every stream and bucket as cotal up provisions it")
		return
	}
	repairable := true
	for _, x := range drifts {
		repairable = repairable && x.Repairable
	}
	js := e.JetStream()
	class := provision.ClassDurable
	if d.mesh.Mode == workspace.ModeOpen {
		class = provision.ClassLive
	}
	var once struct {
		done bool
		err  error
	}
	repair := func() error { // one Space call repairs every drift of the space
		if !once.done {
			once.done = true
			rctx, cancel := context.WithTimeout(ctx, meshWait)
			defer cancel()
			_, once.err = provision.Space(rctx, js, space, provision.Options{DefaultDeliveryClass: class})
		}
		return once.err
	}
	for _, x := range drifts {
		c := Check{Check: "streams", Subject: x.Kind + " " + x.Name, Status: StatusFail}
		switch {
		case x.Missing:
			c.Message = "missing"
		default:
			c.Message = strings.Join(x.Settings, "; ")
		}
		switch {
		case !x.Repairable:
			c.Message += ": not repairable in place: " + x.Why
		case !repairable:
			c.Message += ": repairable, once the conflict beside it is resolved"
		default:
			what := "updated in place"
			if x.Missing {
				what = "created"
			}
			c.fix = func() (string, error) {
				if err := repair(); err != nil {
					return "", err
				}
				return c.Message + ": " + what + " as cotal up provisions it", nil
			}
		}
		d.add(c)
	}
}

// checkPort checks the mesh's port: it answers while the broker runs; while it is down,
// something else holding it would make cotal up fail or move.
func (d *doctor) checkPort() {
	if d.mesh == nil {
		return
	}
	first, _, _ := strings.Cut(d.mesh.Server, ",")
	u, err := url.Parse(first)
	if err != nil || u.Host == "" {
		d.add(Check{Check: "port", Subject: first, Status: StatusFail, Message: "the mesh record's server is not a URL"})
		return
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "4222")
	}
	conn, err := net.DialTimeout("tcp", host, 3*time.Second)
	if conn != nil {
		conn.Close()
	}
	switch {
	case d.up && err == nil:
		d.ok("port", host, "the broker answers")
	case d.up:
		d.add(Check{Check: "port", Subject: host, Status: StatusFail,
			Message: "the broker process runs but its port does not answer: " + err.Error() + "; see " + d.rel(d.proj.Dir()) + "/nats.log"})
	case err == nil:
		d.add(Check{Check: "port", Subject: host, Status: StatusFail,
			Message: "the mesh is down but something else listens on its port; cotal up --server " + first + " would fail: stop that program, or start the mesh on another port"})
	default:
		d.ok("port", host, "free (the mesh is down)")
	}
}

// serverTime is the part of a $SYS server answer doctor reads.
type serverTime struct {
	Server struct {
		Time time.Time `json:"time"`
	} `json:"server"`
}

// checkClock compares this machine's clock with the broker's, asked as the system account
// (an authenticated mesh; an open one has no system user to ask).
func (d *doctor) checkClock(ctx context.Context) {
	if d.mesh.Mode != workspace.ModeAuth {
		return
	}
	chain, err := trust.Open(d.proj.AuthDir())
	if err != nil {
		return // checkTrust reported it
	}
	b, err := chain.SystemCreds(time.Minute)
	if err != nil {
		d.add(Check{Check: "clock", Status: StatusFail, Message: err.Error()})
		return
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		d.add(Check{Check: "clock", Status: StatusFail, Message: err.Error()})
		return
	}
	nc, err := nats.Connect(d.mesh.Server, append(c.Options(), append(client.TLSOptions(d.mesh.TLSCA), nats.Timeout(meshWait))...)...)
	if err != nil {
		d.add(Check{Check: "clock", Subject: d.mesh.Server, Status: StatusFail, Message: "cannot ask the broker as the system account: " + err.Error()})
		return
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, meshWait)
	defer cancel()
	sent := d.opts.Now()
	msg, err := nc.RequestWithContext(rctx, "$SYS.REQ.SERVER.PING", nil)
	got := d.opts.Now()
	if err != nil {
		d.add(Check{Check: "clock", Subject: d.mesh.Server, Status: StatusWarn, Message: "the broker did not say its time: " + err.Error()})
		return
	}
	var st serverTime
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.Server.Time.IsZero() {
		d.add(Check{Check: "clock", Subject: d.mesh.Server, Status: StatusWarn, Message: "the broker's answer names no time"})
		return
	}
	local := sent.Add(got.Sub(sent) / 2)
	skew := st.Server.Time.Sub(local).Round(time.Millisecond)
	abs := skew.Abs()
	msgText := fmt.Sprintf("this machine's clock is %s %s the broker's", abs, map[bool]string{true: "behind", false: "ahead of"}[skew > 0])
	switch {
	case abs >= skewFail:
		d.add(Check{Check: "clock", Subject: d.mesh.Server, Status: StatusFail, Message: msgText + ": credentials and bearers are judged on the broker's clock; set the time (NTP) on the one that is wrong"})
	case abs >= skewWarn:
		d.add(Check{Check: "clock", Subject: d.mesh.Server, Status: StatusWarn, Message: msgText})
	default:
		d.ok("clock", d.mesh.Server, fmt.Sprintf("within %s of the broker's", skewWarn))
	}
}

// checkIdP asks a user-auth space's IdP for the keys its ID tokens are checked with.
func (d *doctor) checkIdP(space string) {
	pin, ok := d.userAuth(space)
	if !ok {
		return
	}
	where := pin.JWKSURI
	if where == "" {
		where = strings.TrimSuffix(pin.LoginURL(), "/") + "/jwks"
	}
	if pin.OIDC() {
		where = strings.TrimSuffix(pin.Issuer, "/") + "/.well-known/openid-configuration"
	}
	resp, err := d.opts.HTTP.Get(where)
	if err != nil {
		d.add(Check{Check: "idp", Subject: "space " + space, Status: StatusFail,
			Message: "the IdP does not answer at " + where + ": " + err.Error() + "; nobody can sign in until it does"})
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.add(Check{Check: "idp", Subject: "space " + space, Status: StatusFail,
			Message: fmt.Sprintf("the IdP answers %s at %s; nobody can sign in until it serves it", resp.Status, where)})
		return
	}
	d.ok("idp", "space "+space, "answers at "+where)
}
