// Package web implements `cotal web`: a dashboard of one space in the browser. It serves
// an embedded single page (plain HTML, CSS and JS) and a small JSON API over a
// meshview.Model, with Server-Sent Events for live updates. It listens on loopback only
// unless --allow-remote, which then requires a token printed at start on every request.
package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// DefaultPort is where the dashboard listens without --port.
const DefaultPort = 7799

// PidFileName is the pidfile of a detached dashboard, in the project's .cotal/.
const PidFileName = "web.pid"

// LogFileName is the log of a detached dashboard, in the project's .cotal/.
const LogFileName = "web.log"

// Options are the flags of `cotal web`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Resolve       cmdutil.ResolveFunc
	Connect       cmdutil.ConnectFunc       // the page's observer
	ConnectSender cmdutil.ConnectSenderFunc // one connection per post from the page, as the person
	// ConnectOperator reads and answers workflow runs as the project's own identity; nil
	// (or a refused connection) leaves the runs panels saying why.
	ConnectOperator cmdutil.ConnectAsFunc
	Getenv          func(string) string
	Executable      func() (string, error) // finds this binary for --detach (launch.Command)
	Logger          *slog.Logger           // nil means discard

	Mesh        cmdutil.MeshFlags
	Host        string
	Port        int
	Detach      bool
	NoOpen      bool
	AllowRemote bool
	AllowHosts  []string // DNS names a request's Host may name, beyond localhost
	PidFile     string   // hidden: the pidfile a detached child writes once it serves
}

// NewCmdWeb builds `cotal web`.
func NewCmdWeb(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.Connect, ConnectSender: f.ConnectPersonSender, ConnectOperator: f.ConnectOperator, Getenv: f.Getenv, Executable: f.Executable, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "web [--host 127.0.0.1] [--port 7799] [--space S] [--detach] [--no-open] [--allow-remote] [--allow-host NAME]",
		Short: "Watch a space in the browser: roster, needs-you, channels, DMs, tasks, file claims and a live graph",
		Long: `Serve a dashboard of one space: who is here and in which state, the agents waiting for a
person (NEEDS YOU), channels with their messages, direct messages, the task board and the
file claims with who holds what, and a graph of agents and channels that lights up as
messages flow. Updates arrive live (Server-Sent Events).

The dashboard watches through a hidden observer: it is never in the roster and takes no work.
On an authenticated mesh it mints an admin read credential from the project's keys (and keeps
no signing key). Posting from the page sends as you, the person at the keyboard (local.<login>
or $COTAL_ACTOR), with a member's rights only: a credential minted for each post that may send
as you and do nothing else (no JetStream administration, no other identity).

It listens on 127.0.0.1 only, and answers only requests for the host it serves (127.0.0.1,
localhost, cotal.localhost or [::1] with its port; --allow-host adds a DNS name), so a page
of another site cannot reach it through DNS rebinding, and a write must come from its own
page. --allow-remote lets --host name another address; every request then needs the token
printed at start: opening the printed URL keeps it in a cookie for that browser.
Stop a detached dashboard with ` + "`cotal down web`" + `; while one runs, --detach prints its
address and starts no other.`,
		Example: `  cotal web
  cotal web --detach --no-open
  cotal web --port 7800 --space team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkHost(opts.Host, opts.AllowRemote, opts.Port); err != nil {
				return err
			}
			for _, h := range opts.AllowHosts {
				if err := checkHostName(h); err != nil {
					return err
				}
			}
			if opts.Port < 0 || opts.Port > 65535 {
				return cmdutil.FlagErrorf("--port %d: want 1 to 65535 (0 picks any free port)", opts.Port)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runWeb(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&opts.Host, "host", "127.0.0.1", "address to listen on (loopback unless --allow-remote)")
	fl.IntVar(&opts.Port, "port", DefaultPort, "port to listen on (0: any free port)")
	fl.BoolVar(&opts.Detach, "detach", false, "run in the background; cotal down web stops it")
	fl.BoolVar(&opts.NoOpen, "no-open", false, "do not open a browser")
	fl.BoolVar(&opts.AllowRemote, "allow-remote", false, "allow a non-loopback --host; every request then needs the printed token")
	fl.StringArrayVar(&opts.AllowHosts, "allow-host", nil, "a DNS name the page may be opened as, beyond localhost (repeat for more)")
	fl.StringVar(&opts.PidFile, "pidfile", "", "pidfile to write once serving (used by --detach)")
	_ = fl.MarkHidden("pidfile") // the flag exists; hiding it cannot fail
	return cmd
}

// checkHost refuses a listen address that is not loopback without --allow-remote.
func checkHost(host string, allowRemote bool, port int) error {
	if host == "" {
		return cmdutil.FlagErrorf("--host is empty: want an address such as 127.0.0.1")
	}
	if host == "localhost" || loopback(host) || allowRemote {
		return nil
	}
	return cmdutil.RefuseUsage("--host "+host,
		"the dashboard shows every message of the space and posts as you, so it listens on loopback only unless --allow-remote (which then requires a token on every request)",
		fmt.Sprintf("cotal web --host 127.0.0.1 --port %d", port))
}

// checkHostName refuses an --allow-host value that is not one DNS name.
func checkHostName(h string) error {
	bad := h == "" || len(h) > 253 || net.ParseIP(h) != nil || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..")
	for _, r := range h {
		if !(r == '.' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			bad = true
		}
	}
	if bad {
		return cmdutil.FlagErrorf("--allow-host %s: want one DNS name such as dash.example.com (an IP address needs no --allow-host)", strconv.QuoteToASCII(h))
	}
	return nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runWeb(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if opts.Detach {
		return detach(ctx, opts, target)
	}
	addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return cmdutil.Refuse("port "+strconv.Itoa(opts.Port), "another process already listens on "+addr,
			fmt.Sprintf("cotal web --port %d", opts.Port+1))
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()

	log := opts.Logger
	// A fresh incarnation: the admin credential minted for it may create its one history
	// reader on the chat and DM streams, which the start-up read uses.
	uid := protocol.NewLifecycleUID()
	observer, err := opts.Connect(ctx, target, client.Config{
		Name: "web", Actor: "web_" + strconv.Itoa(os.Getpid()), Kind: protocol.CardEndpoint, LifecycleUID: uid},
		cmdutil.As{Profile: trust.ProfileAdmin})
	if err != nil {
		return err
	}
	defer observer.Close()

	model := meshview.New(meshview.Config{Logger: log})
	// An operator's --creds decides what is visible: the chat plane only, and history
	// through the delivery daemon (which checks that credential's read ACL). The admin
	// credential minted here (or an open mesh) sees DMs and anycasts too, and reads
	// history straight from the streams.
	dms := target.Creds == "" && target.CredsData == nil
	w := &meshview.Watcher{Endpoint: observer, Model: model, DMs: dms, Logger: log}
	if dms {
		w.Reader = protocol.ConsumerHistory(observer.Principal(), uid)
	} else {
		w.History = func(ctx context.Context, ch string) ([]protocol.Message, error) {
			msgs, _, err := observer.ReadHistory(ctx, ch, 50)
			return msgs, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tapReady := make(chan struct{})
	tapDone := make(chan error, 1)
	go func() { tapDone <- w.Run(ctx, func() { close(tapReady) }) }()
	select {
	case <-tapReady:
	case err := <-tapDone:
		return err
	case <-ctx.Done():
		return <-tapDone
	}

	// The task board and the file claims, watched beside the tap; a space without their
	// buckets (made before them) shows why in the panels, and the rest still serves.
	team := &meshview.TeamWatcher{Conn: observer.Conn(), Space: target.Space, Model: model, Logger: log}
	teamReady := make(chan struct{})
	teamDone := make(chan error, 1)
	go func() { teamDone <- team.Run(ctx, func() { close(teamReady) }) }()
	select {
	case <-teamReady:
	case err := <-teamDone:
		return err
	case <-ctx.Done():
		return <-teamDone
	}

	// Workflow runs: their records and journals are the project identity's to read, and
	// an answer is filed as the person at the keyboard.
	var runs Runs
	runsErr := ""
	if opts.ConnectOperator != nil {
		if rep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner); err != nil {
			runsErr = err.Error()
		} else {
			defer rep.Close()
			runs = &runstore.Space{JS: rep.JetStream(), Name: target.Space, Now: func() int64 { return time.Now().UnixMilli() }}
		}
	} else {
		runsErr = "no operator connection"
	}
	answerBy, _ := cmdutil.OperatorIdentity()

	token := ""
	if opts.AllowRemote {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		token = hex.EncodeToString(b)
	}
	s := &Server{
		Space: target.Space, PID: os.Getpid(), Model: model, DMs: dms, Token: token, Logger: log,
		Port: ln.Addr().(*net.TCPAddr).Port, Hosts: opts.AllowHosts,
		Channels:   observer.ChannelStats,
		HistoryErr: w.HistoryErr,
		TeamErr:    team.Err,
		Send:       func(ctx context.Context, p Post) error { return send(ctx, opts.ConnectSender, target, p) },
		Runs:       runs, RunsErr: runsErr, AnswerBy: answerBy,
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }} // feeds end with ctx
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	url := pageURL(opts.Host, ln.Addr().(*net.TCPAddr).Port, token)
	fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s (space %s)\n", url, target.Space)
	if token != "" {
		fmt.Fprintf(opts.IO.ErrOut, "every request needs the token in that URL; anyone holding it sees the whole space\n")
	}
	pid := &cmdutil.Pidfile{Path: opts.PidFile}
	if err := pid.Write(); err != nil {
		return err
	}
	defer pid.Remove(opts.IO.ErrOut)
	if err := cmdutil.SignalReady(opts.Getenv, url); err != nil {
		return err
	}
	if !opts.NoOpen && opts.IO.IsStdoutTTY() {
		openBrowser(url)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-tapDone:
		tapDone <- err
		runErr = err
	case err := <-teamDone:
		teamDone <- err
		runErr = err
	case err := <-served:
		runErr = fmt.Errorf("serve %s: %w", addr, err)
	}
	cancel()
	shut, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shut); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop serving: %w", err)
	}
	if err := <-tapDone; err != nil && runErr == nil {
		runErr = err
	}
	if err := <-teamDone; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// pageURL is the address to open: the branded cotal.localhost name on the default
// port of a loopback dashboard, the plain address otherwise.
func pageURL(host string, port int, token string) string {
	h := host
	switch {
	case (host == "127.0.0.1" || host == "localhost") && port == DefaultPort:
		h = "cotal.localhost"
	case host == "0.0.0.0" || host == "::":
		h = "127.0.0.1"
	}
	u := "http://" + net.JoinHostPort(h, strconv.Itoa(port)) + "/"
	if token != "" {
		u += "?token=" + token
	}
	return u
}

// send posts p as the person at the keyboard, with that person's rights as a member of
// the space (never the project's keys), on a connection made for this one post, so no
// credential is held between posts.
func send(ctx context.Context, connect cmdutil.ConnectSenderFunc, t cmdutil.Target, p Post) error {
	ep, err := connect(ctx, t)
	if err != nil {
		return err
	}
	defer ep.Close()
	if p.Channel != "" {
		if _, err := ep.Post(ctx, p.Channel, client.Text(p.Text)); err != nil {
			return fmt.Errorf("post to %s: %w", p.Channel, err)
		}
	} else {
		to, err := protocol.ParsePrincipal(p.To)
		if err != nil {
			return err
		}
		if _, err := ep.DM(ctx, to, client.Text(p.Text)); err != nil {
			return fmt.Errorf("dm %s: %w", p.To, err)
		}
	}
	return ep.Close()
}

// openBrowser asks the desktop to open url; a machine without one just has the line.
func openBrowser(url string) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, url)
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }() // reap it; its exit status says nothing to us
	}
}

// pidPath is the pidfile of the project's detached dashboard.
func pidPath(dir string) string { return filepath.Join(dir, PidFileName) }
