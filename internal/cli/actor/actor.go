// Package actor implements `cotal actor`: grant, revoke and list the rows of a space's actor
// ledger, which say which IdP subjects may act as which actor on a user-auth space, and with
// what permissions.
package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// Op is what `cotal actor` was asked to do.
type Op string

// The operations.
const (
	OpGrant  Op = "grant"
	OpRevoke Op = "revoke"
	OpList   Op = "list"
)

// Options are the arguments and flags of `cotal actor grant|revoke|list`.
type Options struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh cmdutil.MeshFlags
	Op   Op
	JSON bool // list

	// Row is what grant stores (its Subjects are added to those already granted); revoke
	// reads Actor and, when given, the one subject in Subjects.
	Row ledger.Row
}

// NewCmdActor builds `cotal actor` with grant, revoke and list.
func NewCmdActor(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "actor <grant|revoke|list>",
		Short: "Grant, revoke and list who may act as which actor on a user-auth space",
		Long: `The actor ledger of a space says which IdP subjects (people, as their identity provider
names them) may act as an actor, and what that actor may read, post and do. A bearer is only
issued for a granted actor, and a change bites at the next exchange and the next connect.
No row means not granted: an empty ledger denies everyone.`,
		Example: `  cotal actor grant alice --sub 248289761001 --allow-subscribe 'team.>' --allow-publish team.backend
  cotal actor list
  cotal actor revoke alice`,
	}
	cmd.AddCommand(newCmdGrant(f, runF), newCmdRevoke(f, runF), newCmdList(f, runF))
	return cmdutil.Group(cmd)
}

func newCmdGrant(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Op: OpGrant}
	cmd := &cobra.Command{
		Use:   "grant <actor> --sub <idp subject> [--role R] [--allow-subscribe P]... [--allow-publish P]... [--scope spawn,admin,...] [--label L]",
		Short: "Let an IdP subject act as an actor, with these permissions",
		Long: `Grant replaces the actor's permissions (role, channels, scopes, label) with the flags given,
and adds the --sub subjects to those already allowed to act as it. Channels are patterns
(team.*, team.>); scopes are spawn, admin, supervise and role:<role>. Without
--allow-subscribe the actor reads no channel (general is never implied), as with
--allow-subscribe ''; a grant must give a scope, --allow-subscribe or --allow-publish.`,
		Example: `  cotal actor grant alice --sub 248289761001 --allow-subscribe 'team.>' --allow-publish team.backend
  cotal actor grant ops --sub ops@example.com --scope spawn,role:default --allow-subscribe '>'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Row.Actor = args[0]
			allow, err := cmdutil.ReadSetFlag("--allow-subscribe", opts.Row.AllowSubscribe)
			if err != nil {
				return cmdutil.RefuseUsage("a grant to actor "+opts.Row.Actor, err.Error(), "")
			}
			// The row holds the read set as the grant resolved it: the ledger stores a list,
			// so an omitted one is written as none (protocol.ReadSet: no implicit general).
			_, opts.Row.AllowSubscribe = protocol.ReadSet(nil, allow)
			if err := checkGrant(opts.Row); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runGrant(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringArrayVar(&opts.Row.Subjects, "sub", nil, "IdP subject allowed to act as the actor (repeatable)")
	fl.StringVar(&opts.Row.Role, "role", "", "anycast role of the actor")
	fl.StringArrayVar(&opts.Row.AllowSubscribe, "allow-subscribe", nil, "channel pattern the actor may read (repeatable; default none)")
	fl.StringArrayVar(&opts.Row.AllowPublish, "allow-publish", nil, "channel pattern the actor may post to (repeatable)")
	fl.StringSliceVar(&opts.Row.Scopes, "scope", nil, "scopes: spawn, admin, supervise, role:<role> (comma-separated or repeated)")
	fl.StringVar(&opts.Row.Label, "label", "", "a note for people reading the ledger")
	return cmd
}

// checkGrant validates the grant's arguments and flags without I/O; what it refuses is a
// usage error.
func checkGrant(r ledger.Row) error {
	what := "a grant to actor " + r.Actor
	if len(r.Subjects) == 0 {
		return cmdutil.RefuseUsage(what, "no --sub says which IdP subject may act as it: give --sub with the subject your IdP names the person by", "")
	}
	if len(r.Scopes)+len(r.AllowSubscribe)+len(r.AllowPublish) == 0 {
		return cmdutil.RefuseUsage(what, "it would grant nothing: give --scope, --allow-subscribe or --allow-publish", "")
	}
	if err := r.Validate(); err != nil {
		return cmdutil.RefuseUsage(what, strings.TrimPrefix(err.Error(), ledger.ErrInvalidRow.Error()+": "), "")
	}
	return nil
}

func newCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Op: OpRevoke}
	var sub string
	cmd := &cobra.Command{
		Use:   "revoke <actor> [--sub S]",
		Short: "Take an actor's grant away, or one subject's right to act as it",
		Long: `Revoke deletes the actor's row; with --sub it only removes that subject, and deletes the
row when no subject is left. It bites at the next exchange and the next connect. On a
user-auth space of the project's own mesh it also evicts the live connections the callout
admitted for what was revoked (the actor, or with --sub that subject's owner), through the
system account; where it cannot, a bearer already issued lives until it expires (minutes).`,
		Example: `  cotal actor revoke alice
  cotal actor revoke ops --sub ops@example.com`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Row.Actor = args[0]
			if !protocol.ValidActor(opts.Row.Actor) {
				return cmdutil.RefuseUsage("a revocation of actor "+opts.Row.Actor, fmt.Sprintf("it is not an actor token (1 to %d letters, digits and _)", protocol.MaxActorLength), "cotal actor list")
			}
			if cmd.Flags().Changed("sub") {
				if err := ledger.CheckSubject(sub); err != nil {
					return cmdutil.RefuseUsage("a revocation of actor "+opts.Row.Actor, err.Error(), "cotal actor list")
				}
				opts.Row.Subjects = []string{sub}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRevoke(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&sub, "sub", "", "remove only this IdP subject")
	return cmd
}

func newCmdList(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Op: OpList}
	cmd := &cobra.Command{
		Use:     "list [--json]",
		Short:   "List the granted actors",
		Example: `  cotal actor list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

// openLedger connects to t as the project's provisioner and opens the space's auth bucket.
// The caller closes the endpoint.
func openLedger(ctx context.Context, opts *Options, t cmdutil.Target) (*client.Endpoint, jetstream.KeyValue, string, error) {
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return nil, nil, "", err
	}
	bucket := provision.BucketAuth(t.Space)
	kv, err := ep.JetStream().KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		ep.Close()
		return nil, nil, "", cmdutil.Refuse("the actor ledger of space "+t.Space,
			"the space has no "+bucket+" bucket yet (it was made by an older cotal); cotal up adds it to the running mesh",
			"cotal up --space "+t.Space)
	}
	if err != nil {
		ep.Close()
		return nil, nil, "", fmt.Errorf("actor ledger %s: %w", bucket, err)
	}
	return ep, kv, t.Space, nil
}

// grantAttempts bounds how often grant re-reads a row that changed under it.
const grantAttempts = 3

// checkUserAuth refuses a grant in a space of the project's own mesh that is not a user-auth
// space: no auth service reads its ledger, so the row would grant nothing. A space served
// elsewhere is left to its own mesh to judge.
func checkUserAuth(t cmdutil.Target, actor string) error {
	if t.Project == nil || t.Remote != nil || t.Mesh == nil || !t.OnProjectMesh() || !slices.Contains(t.Mesh.Spaces, t.Space) {
		return nil
	}
	_, err := authsvc.ReadPin(t.Project.AuthDir(), t.Space)
	if errors.Is(err, authsvc.ErrNotUserAuth) {
		return cmdutil.Refuse(fmt.Sprintf("a grant to actor %s in space %q", actor, t.Space),
			"it is not a user-auth space: its peers hold static creds, and no auth service reads its actor ledger (a user-auth space is made by cotal up --user-auth --idp URL --space NAME)", "")
	}
	return err
}

func runGrant(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if err := checkUserAuth(t, opts.Row.Actor); err != nil {
		return err
	}
	ep, kv, space, err := openLedger(ctx, opts, t)
	if err != nil {
		return err
	}
	defer ep.Close()
	var row ledger.Row
	for range grantAttempts {
		want := opts.Row
		cur, lerr := ledger.Lookup(ctx, kv, want.Actor)
		switch {
		case errors.Is(lerr, ledger.ErrNotGranted):
		case errors.Is(lerr, ledger.ErrInvalidRow):
			return cmdutil.Refuse("a grant to actor "+want.Actor, "its stored row is broken ("+lerr.Error()+"), and a grant would keep subjects from it",
				"cotal actor revoke "+want.Actor)
		case lerr != nil:
			return lerr
		default:
			want.Subjects = append(append([]string{}, cur.Subjects...), want.Subjects...)
			want.Revision = cur.Revision
		}
		row, err = ledger.Grant(ctx, kv, want)
		if !errors.Is(err, ledger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ granted %s in space %s to %s (revision %d)\n", row.Actor, space, strings.Join(row.Subjects, ", "), row.Revision)
	fmt.Fprintf(opts.IO.ErrOut, "it takes effect at the next exchange and connect\n")
	return nil
}

func runRevoke(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, kv, space, err := openLedger(ctx, opts, t)
	if err != nil {
		return err
	}
	defer ep.Close()
	actor, sub := opts.Row.Actor, ""
	if len(opts.Row.Subjects) > 0 {
		sub = opts.Row.Subjects[0]
	}
	row, err := ledger.Revoke(ctx, kv, actor, sub)
	if errors.Is(err, ledger.ErrNotGranted) {
		why := "it is not granted in space " + space
		if sub != "" {
			why = "subject " + sub + " may not act as it in space " + space
		}
		return cmdutil.Refuse("a revocation of actor "+actor, why, "cotal actor list")
	}
	if err != nil {
		return err
	}
	if row.Actor != "" {
		fmt.Fprintf(opts.IO.Out, "✓ revoked subject %s from %s in space %s; %s still may act as it\n", sub, actor, space, strings.Join(row.Subjects, ", "))
	} else {
		fmt.Fprintf(opts.IO.Out, "✓ revoked %s in space %s\n", actor, space)
	}
	n, err := evict(ctx, opts, space, actor, sub)
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "! live connections not evicted (%v): the revoke bites at their next connect, and when their bearers expire (minutes)\n", err)
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "✓ evicted %s; the revoke bites at every next exchange and connect\n", cmdutil.Count(n, "live connection"))
	return nil
}

// evict closes the live connections the revoke took the grant from: every connection an
// auth callout admitted as actor (the owner of sub alone, with --sub). It needs the
// project's system account, so it works on the project's own mesh.
func evict(ctx context.Context, opts *Options, space, actor, sub string) (int, error) {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil || t.Project == nil {
		return 0, errors.New("the project's keys are not at hand")
	}
	chain, err := trust.Open(t.Project.AuthDir())
	if err != nil {
		return 0, err
	}
	pin, err := authsvc.ReadPin(chain.Dir(), space)
	if errors.Is(err, authsvc.ErrNotUserAuth) {
		return 0, nil // no callout admits anyone there
	}
	if err != nil {
		return 0, err
	}
	acct, err := chain.Space(space)
	if err != nil {
		return 0, err
	}
	owner := ""
	if sub != "" {
		secret, err := bearer.LoadOwnerSecret(authsvc.StateDir(chain.Dir(), space))
		if err != nil {
			return 0, err
		}
		iss, s, qualified := ledger.SplitSubject(sub)
		if !qualified {
			iss = pin.Issuer
		}
		owner = secret.Owner(iss, s)
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return 0, err
	}
	c, err := trust.ReadCreds(sysCreds)
	if err != nil {
		return 0, err
	}
	nc, err := nats.Connect(t.Server, append(append(c.Options(), nats.Timeout(5*time.Second)), t.TLSOptions()...)...)
	if err != nil {
		return 0, fmt.Errorf("system account: %w", err)
	}
	defer nc.Close()
	return authsvc.Evict(ctx, nc, acct.PublicKey(), authsvc.CalloutPrincipal(owner, actor))
}

// ListReport is what `cotal actor list --json` prints.
type ListReport struct {
	Space  string       `json:"space"`
	Actors []ledger.Row `json:"actors"`
}

func runList(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, kv, space, err := openLedger(ctx, opts, t)
	if err != nil {
		return err
	}
	defer ep.Close()
	rows, err := ledger.List(ctx, kv)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, ListReport{Space: space, Actors: rows})
	}
	out := opts.IO.Out
	if len(rows) == 0 {
		fmt.Fprintf(out, "no actors granted in space %s\n", space)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTOR\tSUBJECTS\tROLE\tSUBSCRIBE\tPUBLISH\tSCOPES\tLABEL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Actor, list(r.Subjects), orDash(r.Role), list(r.AllowSubscribe),
			list(r.AllowPublish), list(r.Scopes), orDash(cmdutil.OneLine(r.Label)))
	}
	return tw.Flush()
}

func list(s []string) string { return orDash(strings.Join(s, ",")) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
