// Package mint implements `cotal mint`: write a creds file for one identity of a space.
package mint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the arguments and flags of `cotal mint`.
type Options struct {
	IO         *iostreams.IOStreams
	Resolve    cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	AgentCreds cmdutil.AgentCredsFunc
	Mint       func(cmdutil.Target, trust.UserSpec) ([]byte, error)

	Mesh           cmdutil.MeshFlags
	Name           string
	Profile        string
	Role           string
	AllowSubscribe []string
	AllowPublish   []string
	ExpiresIn      time.Duration
	Out            string
	Force          bool // --force: replace the --out file when it exists
	JSON           bool // --json: print the Result as one JSON document
}

// Result is what `cotal mint --json` prints: the file written and who it makes its holder.
type Result struct {
	Path         string `json:"path"`
	Profile      string `json:"profile"`
	Principal    string `json:"principal"`
	LifecycleUID string `json:"lifecycleUid,omitempty"`
	Expires      string `json:"expires,omitempty"` // RFC 3339, UTC; none: no expiry
}

// NewCmdMint builds `cotal mint`.
func NewCmdMint(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, AgentCreds: f.AgentCreds, Mint: f.Mint}
	cmd := &cobra.Command{
		Use:   "mint <name> --profile agent|observer|admin [flags]",
		Short: "Write a creds file for one identity of a space",
		Long: `Mint a NATS credential signed by the space's key (in .cotal/auth/) and write it as a
standard creds file (0600), by default to .cotal/auth/creds/space.<hex>/<name>.creds.
--out FILE writes it to FILE instead, and refuses a FILE that exists unless --force, a
FILE that is a folder, and a FILE whose folder does not exist (it is never created).

Profiles:
  agent     posts only as itself and only to --allow-publish channels (none by default),
            reads its --allow-subscribe channels (none when none is given: it is then
            DM-only, as the reference mints it; general is never implied), its own DMs and, with --role, its
            role's anycasts; writes only its own presence. Its bind-only DM durable (and role
            durable) are created now, so the mesh must be running.
  observer  reads channels and presence, no DMs, publishes nothing (a console).
  admin     reads everything in the space including DMs, publishes nothing (a dashboard):
            not even a request to the agent manager, which only the project's own identity
            drives (cotal spawn --detach, ps, stop, attach, input, run in the project).

The ACL flags (--role, --allow-subscribe, --allow-publish) are for the agent profile only.
Connect with it: cotal join --creds FILE, or any NATS client.`,
		Example: `  cotal mint builder --profile agent --role builder --allow-subscribe general --allow-subscribe 'team.>' --allow-publish general
  cotal mint watcher --profile observer --expires-in 24h --out watcher.creds`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("name %q: use 1 to %d letters, digits or _ (it becomes the actor of the principal)", opts.Name, protocol.MaxActorLength)
			}
			p := trust.Profile(opts.Profile)
			if p != trust.ProfileAgent && p != trust.ProfileObserver && p != trust.ProfileAdmin {
				return cmdutil.FlagErrorf("--profile %q: want agent, observer or admin", opts.Profile)
			}
			if whose, ok := daemonName(opts.Name); ok && p == trust.ProfileAgent {
				return cmdutil.RefuseUsage("an agent credential named "+opts.Name,
					"the name is "+whose+": an agent holding it would post and DM as that daemon, and take its identity (its DM durable)",
					"cotal mint "+opts.Name+"_agent --profile agent")
			}
			if opts.Force && opts.Out == "" {
				return cmdutil.FlagErrorf("--force replaces the --out file: give --out FILE too")
			}
			if opts.Mesh.Creds != "" {
				// The credential mint connects with (to record an agent's identity): a file
				// that cannot be read is refused before anything is minted.
				if _, err := cmdutil.ReadCredsFile("--creds", opts.Mesh.Creds); err != nil {
					return err
				}
			}
			allow, err := cmdutil.ReadSetFlag("--allow-subscribe", opts.AllowSubscribe)
			if err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if allow != nil && len(allow) == 0 && p != trust.ProfileAgent {
				return cmdutil.FlagErrorf("--allow-subscribe is only for the agent profile, not %s", p)
			}
			opts.AllowSubscribe = allow
			if opts.ExpiresIn < 0 {
				return cmdutil.FlagErrorf("--expires-in %s: must not be negative", opts.ExpiresIn)
			}
			check := opts.spec()
			check.LifecycleUID = strings.Repeat("0", 26) // minted at run time; only the flags are checked here
			if err := check.Check(); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runMint(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&opts.Profile, "profile", "agent", "agent, observer or admin")
	fl.StringVar(&opts.Role, "role", "", "agent: a role whose anycasts it may take")
	fl.StringArrayVar(&opts.AllowSubscribe, "allow-subscribe", nil, "agent: a channel (pattern) it may read (repeatable; default none: DM-only)")
	fl.StringArrayVar(&opts.AllowPublish, "allow-publish", nil, "agent: a channel (pattern) it may post to (repeatable; default none)")
	fl.DurationVar(&opts.ExpiresIn, "expires-in", 0, "lifetime, e.g. 24h (default: no expiry)")
	fl.StringVar(&opts.Out, "out", "", "where to write the creds file (an existing file is refused without --force)")
	fl.BoolVar(&opts.Force, "force", false, "with --out: replace the file if it exists")
	fl.BoolVar(&opts.JSON, "json", false, "print the result as one JSON document")
	return cmd
}

// daemonName says whose name actor is when cotal's own daemons connect as it, which no
// agent credential may take.
func daemonName(actor string) (whose string, ok bool) {
	switch actor {
	case "manager":
		return "the agent manager's", true
	case "cotal_delivery":
		return "the delivery daemon's", true
	}
	return "", false
}

func (o *Options) spec() trust.UserSpec {
	return trust.UserSpec{Name: o.Name, Profile: trust.Profile(o.Profile),
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: o.Name}, Role: o.Role,
		AllowSubscribe: o.AllowSubscribe, AllowPublish: o.AllowPublish, ExpiresIn: o.ExpiresIn}
}

// commandLine is this mint command as a person types it, with --force when force.
func (o *Options) commandLine(force bool) string {
	parts := []string{"cotal mint", o.Name, "--profile", cmdutil.ShellQuote(o.Profile)}
	add := func(flag, v string) {
		if v != "" {
			parts = append(parts, flag, cmdutil.ShellQuote(v))
		}
	}
	add("--role", o.Role)
	for _, ch := range o.AllowSubscribe {
		add("--allow-subscribe", ch)
	}
	if o.AllowSubscribe != nil && len(o.AllowSubscribe) == 0 {
		parts = append(parts, "--allow-subscribe", "''")
	}
	for _, ch := range o.AllowPublish {
		add("--allow-publish", ch)
	}
	if o.ExpiresIn > 0 {
		add("--expires-in", o.ExpiresIn.String())
	}
	add("--space", o.Mesh.Space)
	add("--server", o.Mesh.Server)
	add("--creds", o.Mesh.Creds)
	add("--out", o.Out)
	if force {
		parts = append(parts, "--force")
	}
	return strings.Join(parts, " ")
}

func runMint(ctx context.Context, opts *Options) error {
	var out *cmdutil.OutFile
	if opts.Out != "" {
		out = &cmdutil.OutFile{Path: opts.Out, Flag: "--out", Force: opts.Force, Next: opts.commandLine(true), Retry: opts.commandLine(opts.Force)}
		if err := out.Check(); err != nil {
			return err
		}
	}
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if t.Project == nil || (t.Mesh != nil && t.Mesh.Mode != workspace.ModeAuth) {
		return cmdutil.Refuse("a mint on this mesh", "this project's mesh is open (started with --open), and an open mesh takes no credentials: connect without --creds, or, when no agent needs the mesh now, restart it authenticated (cotal down, then cotal up --detach without --open)", "")
	}
	if err := cmdutil.CheckStatic(t, "cotal mint"); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(t.Project.AuthDir(), "broker.json")); errors.Is(err, fs.ErrNotExist) {
		// A chain made now would be one no broker trusts.
		return cmdutil.Refuse("a mint in "+t.Project.Root, "this project has no trust chain yet: its mesh has never run (nothing was written)", "cotal up --detach")
	}
	spec := opts.spec()
	var creds []byte
	if spec.Profile == trust.ProfileAgent {
		creds, err = opts.AgentCreds(ctx, t, spec)
	} else {
		creds, err = opts.Mint(t, spec)
	}
	if err != nil {
		return err
	}
	c, err := trust.ReadCreds(creds)
	if err != nil {
		return err
	}
	if out == nil {
		// The project's own creds folder: state of the workspace, re-minted in place.
		out = &cmdutil.OutFile{Path: cmdutil.CredsPath(t.Project, t.Space, opts.Name), Force: true}
		if err := os.MkdirAll(filepath.Dir(out.Path), 0o700); err != nil {
			return fmt.Errorf("creds folder: %w", err)
		}
	}
	if err := out.Write(creds, 0o600); err != nil {
		return err
	}
	if opts.JSON {
		r := Result{Path: out.Path, Profile: string(c.Profile), Principal: c.Principal.String(), LifecycleUID: c.LifecycleUID}
		if !c.Expires.IsZero() {
			r.Expires = c.Expires.UTC().Format(time.RFC3339)
		}
		return cmdutil.WriteJSON(opts.IO.Out, r)
	}
	fmt.Fprintf(opts.IO.Out, "✓ wrote %s\n", out.Path)
	fmt.Fprintf(opts.IO.ErrOut, "  %s profile, principal %s", c.Profile, c.Principal)
	if c.LifecycleUID != "" {
		fmt.Fprintf(opts.IO.ErrOut, ", lifecycle uid %s", c.LifecycleUID)
	}
	if !c.Expires.IsZero() {
		fmt.Fprintf(opts.IO.ErrOut, ", expires %s", c.Expires.UTC().Format(time.RFC3339))
	}
	if c.Profile == trust.ProfileAgent && len(opts.AllowSubscribe) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "\n  reads no channel (DM-only); --allow-subscribe general would let it read #general")
	}
	fmt.Fprintf(opts.IO.ErrOut, "\n  connect: cotal join --creds %s\n", cmdutil.ShellQuote(out.Path))
	return nil
}
