// Package endpoints implements `cotal endpoints`: every endpoint of a space, infrastructure
// included (the delivery daemon, the auth service, managers, the dashboard, consoles,
// people and agents), with the build each announces, read from what the mesh publishes.
package endpoints

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal endpoints`.
type Options struct {
	IO            *iostreams.IOStreams
	Resolve       cmdutil.ResolveFunc // only run calls it
	ConnectPerson cmdutil.ConnectAsFunc
	// ConnectOperator reads the lease buckets, which an observer cannot.
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	JSON            bool
	Now             func() time.Time // nil is time.Now
}

// Report is what `cotal endpoints --json` prints.
type Report struct {
	Server    string     `json:"server"`
	Space     string     `json:"space"`
	Endpoints []Endpoint `json:"endpoints"`
	// Leases says why the daemons' rows may be missing: the lease buckets could not be
	// read with this credential (an observer's, or a remote mesh's).
	Leases string `json:"leasesError,omitempty"`
}

// Endpoint kinds, infrastructure first.
const (
	KindDelivery = "delivery" // the delivery daemon's lane of the space (its lease)
	KindAuth     = "auth"     // the auth service's lane of the space (its plane claim)
	KindManager  = "manager"  // an agent manager (presence, joined to its lease)
	KindWeb      = "web"      // the dashboard
	KindConsole  = "console"  // a console
	KindService  = "service"  // another endpoint that names a service
	KindPerson   = "person"   // a person at cotal join
	KindAgent    = "agent"    // an agent
)

// kindOrder sorts infrastructure before people and agents.
var kindOrder = []string{KindDelivery, KindAuth, KindManager, KindWeb, KindConsole, KindService, KindPerson, KindAgent}

// Endpoint is one row. Text other than Kind and State comes from the mesh: it is escaped
// before it reaches a terminal.
type Endpoint struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	ID       string `json:"id,omitempty"` // the presence principal, or a daemon's credential holder
	Role     string `json:"role,omitempty"`
	State    string `json:"state"`             // a peer's status (idle, waiting, working, offline); a lane's serving, starting or released
	Version  string `json:"version,omitempty"` // the build it announces (cotal's version); "" when it announces none
	Protocol string `json:"protocolVersion,omitempty"`
	Harness  string `json:"harness,omitempty"` // an agent's connector (claude, codex, opencode, command)
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Instance string `json:"instance,omitempty"` // a daemon's run, a manager's instance id
	Since    int64  `json:"since,omitempty"`    // unix ms: a lane's last write, a peer's last presence
	Activity string `json:"activity,omitempty"`
}

// NewCmdEndpoints builds `cotal endpoints`.
func NewCmdEndpoints(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectPerson: f.ConnectPerson, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "endpoints [--json]",
		Short: "List every endpoint of the space, daemons included, with their versions",
		Long: `List every endpoint of a space as the mesh publishes it, infrastructure first: the
delivery daemon serving the space (its lease row: host, pid, run, version), the auth
service holding the space's plane claim (a user-auth space), each agent manager
(presence, with the host and pid of its lease), the project's detached dashboard (from
its pidfile: it watches without joining presence), people and agents, each with its state and the cotal build it announces (its card's meta
"version", a daemon's lease row; "-" when it announces none, as a reference peer
does) and the protocol version of its card. Read-only.

The daemons' rows need the project's operator credential (cotal status reads them the
same way); with an observer's credential they are left out and the report says why.`,
		Example: `  cotal endpoints
  cotal endpoints --space review --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runEndpoints(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runEndpoints(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	rep, err := Read(ctx, opts, t)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	Print(opts.IO, rep, now(opts))
	return nil
}

func now(opts *Options) time.Time {
	if opts.Now != nil {
		return opts.Now()
	}
	return time.Now()
}

// Read gathers the report of target t: the roster as an observer, the daemons' leases as
// the operator.
func Read(ctx context.Context, opts *Options, t cmdutil.Target) (*Report, error) {
	ep, err := opts.ConnectPerson(ctx, t, trust.ProfileObserver)
	if err != nil {
		return nil, err
	}
	defer ep.Close()
	peers, err := ep.Roster(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Server: t.Server, Space: t.Space, Endpoints: []Endpoint{}}
	var managers map[string]manager.LeaseInfo // by holder principal
	if op, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner); err != nil {
		rep.Leases = err.Error()
	} else {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var lanes []Endpoint
		lanes, managers, err = daemons(lctx, op.JetStream(), t.Space)
		cancel()
		op.Close()
		if err != nil {
			rep.Leases = err.Error()
		}
		rep.Endpoints = append(rep.Endpoints, lanes...)
	}
	for _, p := range peers {
		rep.Endpoints = append(rep.Endpoints, peerRow(p, managers))
	}
	if e, ok := projectWeb(t); ok {
		rep.Endpoints = append(rep.Endpoints, e)
	}
	slices.SortStableFunc(rep.Endpoints, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(slices.Index(kindOrder, a.Kind), slices.Index(kindOrder, b.Kind)), cmp.Compare(a.Name, b.Name))
	})
	return rep, nil
}

// peerRow is a presence record as a row; a manager's joins the lease its principal holds.
func peerRow(p client.Peer, managers map[string]manager.LeaseInfo) Endpoint {
	e := Endpoint{Kind: kindOf(p), Name: p.Card.Name, ID: p.Card.ID, Role: p.Card.Role, State: string(p.State()),
		Version: metaString(p, "version"), Protocol: p.Card.ProtocolVersion, Since: p.TS}
	if h := p.Harness(); e.Kind == KindAgent && h != "" && h != "person" && h != "service" {
		e.Harness = h
	}
	if p.Online {
		e.Activity = p.Activity
	}
	if l, ok := managers[p.Card.ID]; ok && e.Kind == KindManager {
		e.Host, e.PID, e.Instance = l.Host, l.PID, l.InstanceID
	}
	return e
}

// webPidFile is the pidfile `cotal web --detach` writes in the project's .cotal/
// (internal/cli/web.PidFileName).
const webPidFile = "web.pid"

// projectWeb is the project's detached dashboard, when the target is the project's mesh and
// its pidfile names a live process. The dashboard watches as an observer and never joins
// presence, so the mesh does not list it; this row comes from the project's own files and
// has no version.
func projectWeb(t cmdutil.Target) (Endpoint, bool) {
	if t.Project == nil || !t.OnProjectMesh() {
		return Endpoint{}, false
	}
	rec, err := workspace.ReadPidfile(filepath.Join(t.Project.Dir(), webPidFile))
	if err != nil {
		return Endpoint{}, false
	}
	if alive, err := rec.Alive(); err != nil || !alive {
		return Endpoint{}, false
	}
	host, _ := os.Hostname()
	return Endpoint{Kind: KindWeb, Name: "web", State: "up", Host: host, PID: rec.PID}, true
}

// kindOf classifies a presence record by what its card says.
func kindOf(p client.Peer) string {
	actor := p.Card.ID[strings.LastIndexByte(p.Card.ID, '.')+1:]
	switch {
	case metaString(p, "service") == protocol.ManagerServiceName:
		return KindManager
	case p.Card.Kind == protocol.CardEndpoint && p.Card.Name == "web" && strings.HasPrefix(actor, "web_"):
		return KindWeb
	case p.Card.Kind == protocol.CardEndpoint && p.Card.Name == "console" && strings.HasPrefix(actor, "console_"):
		return KindConsole
	case metaString(p, "service") != "":
		return KindService
	case p.Card.Kind == protocol.CardEndpoint:
		return KindPerson
	}
	return KindAgent
}

func metaString(p client.Peer, key string) string {
	s, _ := p.Card.Meta[key].(string)
	return s
}

// daemons reads the space's lanes from the leases: the delivery lease, the plane claim
// (when the space has an auth bucket) and the manager leases (by holder, to join their
// presence). A bucket that is missing is a daemon that never ran; any other failure is
// returned with what was read.
func daemons(ctx context.Context, js jetstream.JetStream, space string) ([]Endpoint, map[string]manager.LeaseInfo, error) {
	var out []Endpoint
	var errs []error
	if info, held, err := delivery.ReadLease(ctx, js, space); err != nil {
		errs = append(errs, err)
	} else if held {
		state := "starting"
		if info.Ready {
			state = "serving"
		}
		out = append(out, Endpoint{Kind: KindDelivery, Name: "delivery " + space, ID: info.Holder, State: state,
			Version: info.Version, Host: info.Host, PID: info.PID, Instance: info.Instance, Since: info.Since})
	}
	if e, ok, err := authLane(ctx, js, space); err != nil {
		errs = append(errs, err)
	} else if ok {
		out = append(out, e)
	}
	managers, err := managerLeases(ctx, js, space)
	if err != nil {
		errs = append(errs, err)
	}
	return out, managers, errors.Join(errs...)
}

// authLane is the auth service's plane claim of space; ok is false on a space without an
// auth bucket (not user-auth) or without a claim. The claim row is the reference's shape,
// which carries no version.
func authLane(ctx context.Context, js jetstream.JetStream, space string) (Endpoint, bool, error) {
	kv, err := js.KeyValue(ctx, provision.BucketAuth(space))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return Endpoint{}, false, nil
	}
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("auth bucket of space %q: %w", space, err)
	}
	e, err := kv.Get(ctx, plane.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Endpoint{}, false, nil
	}
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("plane claim of space %q: %w", space, err)
	}
	row, err := plane.DecodeRow(e.Value())
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("plane claim of space %q: %w", space, err)
	}
	state := "released"
	if row.State == plane.StateHeld {
		state = "serving"
	}
	return Endpoint{Kind: KindAuth, Name: "auth " + space, State: state, Host: row.Ledger.ServerID,
		Instance: fmt.Sprintf("generation %d", row.Generation), Since: int64(row.OpenedAt)}, true, nil
}

// managerLeases reads every manager lease row of space, by holder.
func managerLeases(ctx context.Context, js jetstream.JetStream, space string) (map[string]manager.LeaseInfo, error) {
	kv, err := js.KeyValue(ctx, protocol.BucketManager(space))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("manager lease bucket of space %q: %w", space, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("manager lease bucket of space %q: %w", space, err)
	}
	out := map[string]manager.LeaseInfo{}
	for k := range keys.Keys() {
		if !strings.HasPrefix(k, "lease.") {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // expired between the listing and the read
		}
		var info manager.LeaseInfo
		if json.Unmarshal(e.Value(), &info) == nil && info.Holder != "" {
			out[info.Holder] = info
		}
	}
	return out, nil
}

// Print writes the report as a table; every field the mesh wrote is escaped.
func Print(ios *iostreams.IOStreams, rep *Report, now time.Time) {
	out := ios.Out
	fmt.Fprintf(out, "space %s on %s: %s\n", rep.Space, rep.Server, cmdutil.Count(len(rep.Endpoints), "endpoint"))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATE\tVERSION\tPROTOCOL\tWHERE")
	for _, e := range rep.Endpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Kind, cmdutil.OneLine(e.Name), e.State, dash(e.Version), dash(e.Protocol), where(e, now))
	}
	_ = tw.Flush() // a write error shows on the next write to out
	if rep.Leases != "" {
		fmt.Fprintf(ios.ErrOut, "! daemons not shown: %s\n", cmdutil.OneLine(rep.Leases))
	}
}

// where is a row's last column: who, on which host, doing what.
func where(e Endpoint, now time.Time) string {
	var parts []string
	if e.ID != "" && e.Kind != KindDelivery {
		parts = append(parts, e.ID)
	}
	if e.Role != "" {
		parts = append(parts, "role="+e.Role)
	}
	if e.Harness != "" {
		parts = append(parts, "runs "+e.Harness)
	}
	switch {
	case e.Kind == KindAuth:
		parts = append(parts, "server "+e.Host, e.Instance)
	case e.Host != "" || e.PID != 0:
		parts = append(parts, fmt.Sprintf("host %s pid %d", e.Host, e.PID))
	}
	if e.Kind == KindDelivery || e.Kind == KindAuth {
		parts = append(parts, "since "+time.UnixMilli(e.Since).UTC().Format(time.RFC3339))
	} else if e.State == string(protocol.StatusOffline) && e.Since > 0 {
		parts = append(parts, "last seen "+now.Sub(time.UnixMilli(e.Since)).Round(time.Second).String()+" ago")
	}
	if e.Activity != "" {
		parts = append(parts, fmt.Sprintf("%q", e.Activity))
	}
	return cmdutil.OneLine(strings.Join(parts, "  "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return cmdutil.OneLine(s)
}
