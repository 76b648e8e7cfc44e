// Package status implements `cotal status`: the mesh, the space, its roster and channels.
package status

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/client"
	a2apeers "github.com/cotal-ai/cotal/internal/cli/a2a/peers"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal status`.
type Options struct {
	IO            *iostreams.IOStreams
	Resolve       cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectPerson cmdutil.ConnectAsFunc
	// ConnectOperator reads the lease buckets, which an observer cannot.
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	JSON            bool
}

// Report is what `cotal status --json` prints.
type Report struct {
	Server   string               `json:"server"`
	Mode     string               `json:"mode,omitempty"`
	Root     string               `json:"root,omitempty"`
	PID      int                  `json:"pid,omitempty"`
	Space    string               `json:"space"`
	Spaces   []string             `json:"spaces,omitempty"`
	UserAuth *UserAuthReport      `json:"userAuth,omitempty"` // set on a user-auth space
	Daemons  []DaemonReport       `json:"daemons,omitempty"`  // the space's daemons on this project's mesh
	Leases   []LeaseReport        `json:"leases,omitempty"`   // with Daemons: which daemon serves each lane
	Roster   []RosterEntry        `json:"roster"`
	Channels []client.ChannelStat `json:"channels"`
	Tasks    map[string]int       `json:"tasks,omitempty"` // the task board: how many tasks in each status (absent without a board)
	// A2APeers are the external A2A agents registered on the space (cotal a2a add), read
	// with the project's own identity: absent where it cannot read the registry.
	A2APeers []a2apeers.Entry `json:"a2aPeers,omitempty"`
	A2A      string           `json:"a2a,omitempty"` // the project's A2A gateway (cotal a2a) while it serves: its base URL
}

// a2aURL is the base URL of the project's A2A gateway, read from .cotal/a2a/serve.url
// (internal/cli/a2a.URLPath), which it writes while it serves; "" when none serves. A URL
// left by a detached gateway that has since died (its pidfile names a dead process) is
// not shown, nor a file that holds anything but one http(s) URL.
func a2aURL(t cmdutil.Target) string {
	if t.Project == nil {
		return ""
	}
	dir := filepath.Join(t.Project.Dir(), "a2a")
	b, err := os.ReadFile(filepath.Join(dir, "serve.url"))
	if err != nil || len(b) > 2048 {
		return ""
	}
	u := strings.TrimSpace(string(b))
	if strings.ContainsAny(u, " \t\r\n") || !(strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
		return ""
	}
	if rec, err := workspace.ReadPidfile(filepath.Join(dir, "serve.pid")); err == nil {
		if alive, _ := rec.Alive(); !alive {
			return ""
		}
	}
	return u
}

// UserAuthReport is how people sign in to a user-auth space.
type UserAuthReport struct {
	IdP      string `json:"idp"`                // where people sign in: cotal login --idp
	ClientID string `json:"clientId,omitempty"` // an OIDC IdP: the audience of its ID tokens
	Issuer   string `json:"issuer,omitempty"`   // an IdP pinned the reference's way: the iss (and aud) of its ID tokens
	Exchange string `json:"exchange,omitempty"` // the exchange clients use; empty: auth service not ready
	Public   string `json:"publicUrl,omitempty"`
	Remote   bool   `json:"remote,omitempty"` // a mesh registered with cotal meshes add
}

// userAuthReport describes the target's sign-in, or nil when it is not a user-auth space.
func userAuthReport(t cmdutil.Target) *UserAuthReport {
	if e := t.Remote; e != nil {
		r := &UserAuthReport{IdP: e.LoginURL(), ClientID: e.IdPClientID, Exchange: e.ExchangeURL, Public: e.ExchangeURL, Remote: true}
		if e.ReferenceIdP() {
			r.ClientID, r.Issuer = "", e.IdPIssuer
		}
		return r
	}
	if t.Project == nil {
		return nil
	}
	pin, err := authsvc.ReadPin(t.Project.AuthDir(), t.Space)
	if err != nil {
		return nil
	}
	r := &UserAuthReport{IdP: pin.LoginURL(), ClientID: pin.ClientID}
	if !pin.OIDC() {
		r.Issuer = pin.Issuer
	}
	if st, err := authsvc.ReadStatus(authsvc.StateDir(t.Project.AuthDir(), t.Space)); err == nil {
		r.Exchange, r.Public = st.URL, st.PublicURL
	}
	return r
}

// DaemonReport is the state of one daemon the project's broker runs for the space.
type DaemonReport struct {
	Name  string `json:"name"`  // "delivery" or "auth"
	State string `json:"state"` // "up", "held" (by cotal down, until cotal up) or "down"
	PID   int    `json:"pid,omitempty"`
	Log   string `json:"log"`
}

// daemonReports reads the pidfiles of the space's daemons on the project's authenticated
// mesh: its delivery daemon, and its auth service on a user-auth space.
func daemonReports(t cmdutil.Target, userAuth bool) []DaemonReport {
	if t.Project == nil || t.Mesh == nil || t.Mesh.Mode != workspace.ModeAuth || !t.OnProjectMesh() {
		return nil
	}
	var out []DaemonReport
	for _, k := range workspace.Daemons() {
		if (k.Component == "auth" && !userAuth) || (k.Component == "manager" && userAuth) {
			continue
		}
		pidFile := k.PidFile(t.Project, t.Space)
		d := DaemonReport{Name: k.Component, State: "down", Log: k.LogFile(t.Project, t.Space)}
		if rec, err := workspace.ReadPidfile(pidFile); err == nil {
			if alive, _ := rec.Alive(); alive {
				d.State, d.PID = "up", rec.PID
			}
		}
		if _, err := os.Stat(workspace.HeldFile(pidFile)); d.State == "down" && err == nil {
			d.State = "held"
		}
		out = append(out, d)
	}
	return out
}

// readLeases reads the space's leases as the project's provisioner (an observer cannot
// read the lease buckets); a connection that fails is reported on each lease.
func readLeases(ctx context.Context, opts *Options, t cmdutil.Target, daemons []DaemonReport, userAuth bool) []LeaseReport {
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return []LeaseReport{{Name: "delivery", State: "unknown", Error: err.Error()}}
	}
	defer ep.Close()
	return leaseReports(ctx, ep.JetStream(), t.Space, ep.Conn().ConnectedServerId(), daemons, userAuth)
}

// readA2APeers reads the space's external A2A agents as the project's provisioner, on
// the project's own mesh only; nil when there is none or the registry cannot be read.
func readA2APeers(ctx context.Context, opts *Options, t cmdutil.Target) []a2apeers.Entry {
	if t.Project == nil || t.Remote != nil || t.Creds != "" || (t.Mesh != nil && !t.OnProjectMesh()) {
		return nil
	}
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return nil
	}
	defer ep.Close()
	rep, err := a2apeers.List(ctx, ep)
	if err != nil {
		return nil
	}
	return rep.Peers
}

// RosterEntry is one peer in the report.
type RosterEntry struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Role     string `json:"role,omitempty"`
	Kind     string `json:"kind"`
	State    string `json:"state"`
	Activity string `json:"activity,omitempty"`
	LastSeen int64  `json:"lastSeen"`
	// Harness is what runs the peer (claude, codex, opencode, command, person, service;
	// client.Peer.Harness), Model the model it names, Cwd its working directory relative
	// to the project (a full path outside it is not shown), Channels what it reads now.
	Harness  string   `json:"harness,omitempty"`
	Model    string   `json:"model,omitempty"`
	Cwd      string   `json:"cwd,omitempty"`
	Channels []string `json:"channels,omitempty"`
	// Claims are its live file claims (cotal claims has them all).
	Claims []ClaimEntry `json:"claims,omitempty"`
	// Tasks are the ids of the unfinished board tasks it holds.
	Tasks []string `json:"tasks,omitempty"`
	// Skills are the names of the skills its card advertises (an A2A agent's).
	Skills []string `json:"skills,omitempty"`
}

// ClaimEntry is one file claim of a roster entry.
type ClaimEntry struct {
	Path      string `json:"path"`
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason,omitempty"`
	Since     string `json:"since"`     // RFC 3339, UTC
	ExpiresAt string `json:"expiresAt"` // RFC 3339, UTC
}

// rosterEntry is p as the report shows it, with its claims from held (by holder id).
func rosterEntry(p client.Peer, root string, held map[string][]claims.Claim) RosterEntry {
	e := RosterEntry{ID: p.Card.ID, Name: p.Card.Name, Role: p.Card.Role, Kind: p.Card.Kind,
		State: string(p.State()), Activity: p.Activity, LastSeen: p.TS, Harness: p.Harness(), Model: p.Model()}
	if cwd, err := claims.Normalize(p.Cwd(), root); p.Cwd() != "" && err == nil {
		e.Cwd = cwd
	}
	if p.Online {
		e.Channels = p.Channels
	}
	for _, s := range p.Card.Skills {
		e.Skills = append(e.Skills, s.Name)
	}
	for _, c := range held[p.Card.ID] {
		e.Claims = append(e.Claims, ClaimEntry{Path: c.Path, Exclusive: c.Exclusive, Reason: c.Reason,
			Since: time.UnixMilli(c.Since).UTC().Format(time.RFC3339), ExpiresAt: c.ExpiresAt().UTC().Format(time.RFC3339)})
	}
	return e
}

// heldClaims reads the space's live claims by holder id; nil when the space has no
// claims bucket (made before claims: cotal up adds it).
func heldClaims(ctx context.Context, ep *client.Endpoint, space string) map[string][]claims.Claim {
	all, err := (&claims.Store{JS: ep.JetStream(), Space: space}).List(ctx)
	if err != nil {
		return nil
	}
	by := map[string][]claims.Claim{}
	for _, c := range all {
		by[c.Holder] = append(by[c.Holder], c)
	}
	return by
}

// NewCmdStatus builds `cotal status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectPerson: f.ConnectPerson, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the mesh, the space, who is here and the channels",
		Long: `Show the mesh this project runs (or the one --server names), the space, every peer in
presence with its state (idle, waiting, working, offline), and the channels with the
number of messages their history holds. On the project's own mesh it also shows the
space's daemons: up, held down by cotal down (cotal up starts them again), or not
running (with their log), and which daemon holds each lease: the delivery lease, and on
a user-auth space the auth service's plane claim (on a cluster, one node's daemons serve
and the others stand by), and the URL of the project's A2A gateway while cotal a2a
serves. Read-only.`,
		Example: `  cotal status
  cotal status --space review --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runStatus(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runStatus(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectPerson(ctx, target, trust.ProfileObserver)
	if err != nil {
		return err
	}
	defer ep.Close()
	peers, err := ep.Roster(ctx)
	if err != nil {
		return err
	}
	channels, err := ep.ChannelStats(ctx)
	if err != nil {
		return err
	}
	rep := Report{Server: target.Server, Space: target.Space, UserAuth: userAuthReport(target), Roster: []RosterEntry{}, Channels: channels}
	rep.Daemons = daemonReports(target, rep.UserAuth != nil && !rep.UserAuth.Remote)
	rep.A2A = a2aURL(target)
	if len(rep.Daemons) > 0 {
		rep.Leases = readLeases(ctx, opts, target, rep.Daemons, rep.UserAuth != nil)
	}
	if m := target.Mesh; m != nil && m.Server == target.Server {
		rep.Mode, rep.Root, rep.PID, rep.Spaces = m.Mode, m.Root, m.PID, m.Spaces
	}
	var holding map[string][]string // task ids by holder
	if b, err := taskboard.Connect(ctx, ep.Conn(), ep.Space(), ep.Principal(), taskboard.Options{}); err == nil {
		if all, err := b.List(ctx); err == nil {
			rep.Tasks = map[string]int{}
			for _, t := range all {
				rep.Tasks[t.Status]++
			}
			holding = taskboard.HeldBy(all)
		}
	}
	root := ""
	if target.Project != nil {
		root = target.Project.Root
	}
	held := heldClaims(ctx, ep, target.Space)
	for _, p := range peers {
		e := rosterEntry(p, root, held)
		e.Tasks = holding[p.Card.ID]
		rep.Roster = append(rep.Roster, e)
		delete(held, p.Card.ID)
	}
	// Holders gone from presence (killed, or away past its TTL) whose claims still live.
	for _, id := range slices.Sorted(maps.Keys(held)) {
		p := client.Peer{Presence: protocol.Presence{Card: protocol.AgentCard{ID: id, Name: held[id][0].Name}, Status: protocol.StatusOffline}}
		rep.Roster = append(rep.Roster, rosterEntry(p, root, held))
	}
	rep.A2APeers = readA2APeers(ctx, opts, target)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	fmt.Fprintf(out, "mesh     %s", rep.Server)
	if rep.Mode != "" {
		fmt.Fprintf(out, " (%s, pid %d, %s)", rep.Mode, rep.PID, rep.Root)
	}
	fmt.Fprintf(out, "\nspace    %s\n", rep.Space)
	if len(rep.Spaces) > 1 {
		fmt.Fprintf(out, "spaces   %v\n", rep.Spaces)
	}
	if ua := rep.UserAuth; ua != nil {
		where := "auth service not ready"
		if ua.Exchange != "" {
			where = "exchange " + ua.Exchange
		}
		if ua.Public != "" && ua.Public != ua.Exchange {
			where += ", public face " + ua.Public
		}
		kind := "client " + ua.ClientID
		if ua.ClientID == "" {
			kind = "issuer " + ua.Issuer
		}
		fmt.Fprintf(out, "sign-in  %s (%s); %s\n", ua.IdP, kind, where)
	}
	if len(rep.Daemons) > 0 {
		fmt.Fprint(out, "daemons ")
		for i, d := range rep.Daemons {
			sep := ","
			if i == 0 {
				sep = ""
			}
			switch d.State {
			case "up":
				fmt.Fprintf(out, "%s %s up (pid %d)", sep, d.Name, d.PID)
			case "held":
				fmt.Fprintf(out, "%s %s held down (cotal up --space %s starts it)", sep, d.Name, rep.Space)
			default:
				fmt.Fprintf(out, "%s %s not running (see %s)", sep, d.Name, d.Log)
			}
		}
		fmt.Fprintln(out)
	}
	printLeases(out, rep.Leases)
	if rep.A2A != "" {
		fmt.Fprintf(out, "a2a      %s/.well-known/agent-card.json (cotal a2a; cotal down a2a stops a detached one)\n", cmdutil.OneLine(rep.A2A))
	}
	if rep.Tasks != nil {
		held := rep.Tasks[taskboard.Claimed] + rep.Tasks[taskboard.Working] + rep.Tasks[taskboard.Blocked]
		fmt.Fprintf(out, "tasks    %d open, %d held, %d done (cotal tasks list)\n", rep.Tasks[taskboard.Open], held, rep.Tasks[taskboard.Done])
	}
	fmt.Fprintf(out, "\nroster (%d)\n", len(rep.Roster))
	now := time.Now()
	for i, p := range peers {
		fmt.Fprintln(out, "  "+cmdutil.PeerLine(p, now)+detail(rep.Roster[i]))
	}
	for _, e := range rep.Roster[len(peers):] {
		fmt.Fprintf(out, "  %s (%s) offline%s\n", cmdutil.OneLine(e.Name), cmdutil.OneLine(e.ID), detail(e))
	}
	if len(rep.A2APeers) > 0 {
		fmt.Fprintf(out, "\na2a peers (%d)\n", len(rep.A2APeers))
		for _, e := range rep.A2APeers {
			fmt.Fprintln(out, "  "+a2apeers.Line(e))
		}
	}
	fmt.Fprintf(out, "\nchannels (%d)\n", len(channels))
	for _, c := range channels {
		fmt.Fprintf(out, "  #%-24s %s", cmdutil.OneLine(c.Name), cmdutil.Count(c.Messages, "message"))
		if c.Config.Description != "" {
			fmt.Fprintf(out, "  %s", cmdutil.OneLine(c.Config.Description))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// detail is what a roster line adds: what runs the peer, where, and what it claims.
func detail(e RosterEntry) string {
	var parts []string
	harness := e.Harness
	if harness == "person" || harness == "service" {
		harness = "" // the kind of peer, said by its line already
	}
	if run := strings.TrimSpace(harness + " " + e.Model); run != "" {
		parts = append(parts, "runs "+cmdutil.OneLine(run))
	}
	if e.Cwd != "" {
		parts = append(parts, "in "+cmdutil.OneLine(e.Cwd))
	}
	if len(e.Claims) > 0 {
		var cs []string
		for _, c := range e.Claims {
			cs = append(cs, cmdutil.OneLine(c.Path))
		}
		parts = append(parts, "claims "+strings.Join(cs, ", "))
	}
	if len(e.Tasks) > 0 {
		parts = append(parts, "tasks "+cmdutil.OneLine(strings.Join(e.Tasks, ", ")))
	}
	if len(e.Skills) > 0 {
		parts = append(parts, "skills "+cmdutil.OneLine(strings.Join(e.Skills, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  [" + strings.Join(parts, "; ") + "]"
}
