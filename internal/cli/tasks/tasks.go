// Package tasks implements `cotal tasks`: the space's shared task board (list, show,
// create, claim, done) as the person at the keyboard.
package tasks

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// Options are the arguments and flags of every `cotal tasks` subcommand.
type Options struct {
	IO      *iostreams.IOStreams
	Resolve cmdutil.ResolveFunc       // the mesh the flags name; only run calls it
	Connect cmdutil.ConnectSenderFunc // as the person at the keyboard
	Now     func() time.Time          // nil is time.Now
	Verb    string                    // list, show, create, claim or done
	Mesh    cmdutil.MeshFlags
	JSON    bool

	ID       string // show, claim, done
	Title    string // create
	Body     string
	Role     string // create; list filter
	Assignee string // create
	Status   string // list filter
	Mine     bool   // list filter
	Note     string // done
}

// NewCmdTasks builds `cotal tasks` and its subcommands.
func NewCmdTasks(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks <list|show|create|claim|done>",
		Short: "The space's shared task board: list, show, create, claim and finish tasks",
		Long: `The task board is a durable list per space (the bucket cotal_tasks_<space>) that agents
use through cotal_task_create, cotal_task_claim, cotal_task_update and cotal_task_list. A task
is open, claimed, working, blocked, done, failed or cancelled. Exactly one claimer wins a
claim; the holder alone changes the task, and its claim lapses when it stops renewing it
(agents renew while cotal mcp runs; from here, claim again to renew). These commands act as
the person at the keyboard (local.<login>, or $COTAL_ACTOR).`,
		Example: `  cotal tasks list
  cotal tasks create "review the login patch" --role reviewer
  cotal tasks claim 3n4l5o46cmlc
  cotal tasks done 3n4l5o46cmlc --note "merged"`,
	}
	sub := func(verb, use, short, example string, args cobra.PositionalArgs, flags func(*cobra.Command, *Options)) *cobra.Command {
		opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.ConnectPersonSender, Verb: verb}
		c := &cobra.Command{Use: use, Short: short, Example: example, Args: args,
			RunE: func(cmd *cobra.Command, a []string) error {
				if err := opts.take(a); err != nil {
					return err
				}
				if runF != nil {
					return runF(cmd.Context(), opts)
				}
				return run(cmd.Context(), opts)
			}}
		opts.Mesh.Register(c.Flags())
		c.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
		if flags != nil {
			flags(c, opts)
		}
		return c
	}
	cmd.AddCommand(
		sub("list", "list [--status S] [--role R] [--mine] [--json]", "List the tasks (default: every unfinished one)",
			"  cotal tasks list --status open --role reviewer", cobra.NoArgs, func(c *cobra.Command, o *Options) {
				c.Flags().StringVar(&o.Status, "status", "", "only this status, or any (default: every unfinished task)")
				c.Flags().StringVar(&o.Role, "role", "", "only tasks for this role")
				c.Flags().BoolVar(&o.Mine, "mine", false, "only tasks you hold or that are assigned to you")
			}),
		sub("show", "show <id> [--json]", "Show one task whole", "  cotal tasks show 3n4l5o46cmlc", cobra.ExactArgs(1), nil),
		sub("create", "create <title> [--body B] [--role R] [--assignee PEER] [--json]", "Add an open task (with --role, one holder of the role is sent a notice)",
			`  cotal tasks create "fix the flaky test" --body "see CI run 41" --role worker
  cotal tasks create "review the auth change" --assignee bob`, cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
				c.Flags().StringVar(&o.Body, "body", "", fmt.Sprintf("details (at most %d bytes)", taskboard.MaxBody))
				c.Flags().StringVar(&o.Role, "role", "", "the role it is for; one of its holders is sent an anycast notice")
				c.Flags().StringVar(&o.Assignee, "assignee", "", "the one peer (a name, or an owner.actor id) who may claim it; it is sent a DM")
			}),
		sub("claim", "claim <id> [--json]", "Claim a task (again: renew your claim)", "  cotal tasks claim 3n4l5o46cmlc", cobra.ExactArgs(1), nil),
		sub("done", "done <id> [--note N] [--json]", "Mark a task you hold done", `  cotal tasks done 3n4l5o46cmlc --note "merged"`, cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
			c.Flags().StringVar(&o.Note, "note", "", fmt.Sprintf("the result (at most %d bytes)", taskboard.MaxNote))
		}),
	)
	return cmdutil.Group(cmd)
}

// take checks the arguments and flags without I/O.
func (o *Options) take(args []string) error {
	switch o.Verb {
	case "show", "claim", "done":
		o.ID = args[0]
		if !taskboard.ValidID(o.ID) {
			return cmdutil.FlagErrorf("task id %q: want 1 to 32 of a-z 0-9 (cotal tasks list shows them)", o.ID)
		}
	case "create":
		o.Title = args[0]
		if err := (taskboard.TaskRow{Title: o.Title, Body: o.Body, Role: o.Role}).Check(); err != nil {
			return cmdutil.FlagErrorf("%s", strings.TrimPrefix(err.Error(), taskboard.ErrBadInput.Error()+": "))
		}
		if o.Assignee != "" {
			if err := protocol.CheckDisplayName(o.Assignee); err != nil {
				return cmdutil.FlagErrorf("--assignee: %v", err)
			}
		}
	case "list":
		if o.Status != "" && o.Status != "any" && !taskboard.ValidStatus(o.Status) {
			return cmdutil.FlagErrorf("--status %q: want any or one of %s", o.Status, strings.Join(taskboard.Statuses, ", "))
		}
		if o.Role != "" {
			if err := protocol.CheckRole(o.Role); err != nil {
				return cmdutil.FlagErrorf("--role: %v", err)
			}
		}
	}
	if len(o.Note) > taskboard.MaxNote {
		return cmdutil.FlagErrorf("--note is %d bytes, over the limit of %d", len(o.Note), taskboard.MaxNote)
	}
	return nil
}

func run(ctx context.Context, o *Options) error {
	t, err := o.Resolve(o.Mesh)
	if err != nil {
		return err
	}
	ep, err := o.Connect(ctx, t)
	if err != nil {
		return err
	}
	defer func() { _ = ep.Close() }() // the command is done with the mesh
	b, err := taskboard.Connect(ctx, ep.Conn(), ep.Space(), ep.Principal(), taskboard.Options{Now: o.Now})
	if err != nil {
		return err
	}
	switch o.Verb {
	case "list":
		all, err := b.List(ctx)
		if err != nil {
			return err
		}
		return o.list(all, ep.Principal().String())
	case "show":
		task, err := b.Get(ctx, o.ID)
		if err != nil {
			return err
		}
		return o.one(task, "")
	case "create":
		// An assignee must be someone the space knows (in its roster, or with an inbox),
		// as for cotal send dm: a task for nobody would wait forever. Nothing is created
		// otherwise.
		var assignee client.Target
		if o.Assignee != "" {
			if assignee, err = ep.Resolve(ctx, o.Assignee); err != nil {
				return fmt.Errorf("--assignee: %w", err)
			}
			o.Assignee = assignee.Principal.String()
		}
		task, err := b.Create(ctx, taskboard.TaskRow{Title: o.Title, Body: o.Body, Role: o.Role, Assignee: o.Assignee})
		if err != nil {
			return err
		}
		notice := fmt.Sprintf("Task %s: %s. Claim it with cotal_task_claim {\"id\": %q}.", task.ID, task.Title, task.ID)
		switch {
		case task.Assignee != "":
			if _, err := ep.DM(ctx, assignee.Principal, client.Text(notice)); err != nil {
				return fmt.Errorf("task %s created; telling %s: %w", task.ID, task.Assignee, err)
			}
		case task.Role != "":
			if _, err := ep.Ask(ctx, task.Role, client.Text(notice)); err != nil {
				return fmt.Errorf("task %s created; telling role %s: %w", task.ID, task.Role, err)
			}
		}
		if err := o.one(task, "created"); err != nil || o.JSON || assignee.State != protocol.StatusOffline {
			return err
		}
		_, err = fmt.Fprintf(o.IO.Out, "%s is offline: the notice waits in its inbox until it joins\n", task.Assignee)
		return err
	case "claim":
		task, err := b.Claim(ctx, o.ID)
		if err != nil {
			return err
		}
		return o.one(task, "claimed")
	default: // done
		task, err := b.Update(ctx, o.ID, taskboard.Done, o.Note)
		if err != nil {
			return err
		}
		return o.one(task, "done")
	}
}

func (o *Options) list(all []taskboard.Task, me string) error {
	out := []taskboard.Task{}
	for i := len(all) - 1; i >= 0; i-- {
		t := all[i]
		switch {
		case o.Status == "" && taskboard.Terminal(t.Status),
			o.Status != "" && o.Status != "any" && t.Status != o.Status,
			o.Role != "" && t.Role != o.Role,
			o.Mine && t.Holder != me && t.Assignee != me:
			continue
		}
		out = append(out, t)
	}
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, struct {
			Tasks []taskboard.Task `json:"tasks"`
		}{out})
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(o.IO.Out, "no tasks match")
		return err
	}
	for _, t := range out {
		if _, err := fmt.Fprintln(o.IO.Out, line(t)); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) one(t taskboard.Task, did string) error {
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, t)
	}
	w := o.IO.Out
	if did != "" {
		fmt.Fprintf(w, "✓ %s ", did)
	}
	fmt.Fprintln(w, line(t))
	if did == "" {
		whole(w, t)
	} else if !t.LeaseUntil.IsZero() {
		fmt.Fprintf(w, "your claim lapses at %s unless renewed (cotal tasks claim %s)\n", t.LeaseUntil.UTC().Format(time.RFC3339), t.ID)
	}
	return nil
}

// line is one task on one line; every peer-written string is escaped.
func line(t taskboard.Task) string {
	s := fmt.Sprintf("%s  %-9s %s", t.ID, t.Status, termsafe.Escape(t.Title))
	if t.Role != "" {
		s += "  role " + t.Role
	}
	if t.Holder != "" {
		s += "  held by " + t.Holder
	} else if t.Assignee != "" {
		s += "  for " + t.Assignee
	}
	if t.Note != "" {
		s += "  - " + termsafe.Escape(t.Note)
	}
	return s
}

func whole(w io.Writer, t taskboard.Task) {
	fmt.Fprintf(w, "created by %s at %s, updated %s\n", t.Creator, t.Created.UTC().Format(time.RFC3339), t.Updated.UTC().Format(time.RFC3339))
	if !t.LeaseUntil.IsZero() {
		fmt.Fprintf(w, "claim lapses at %s unless renewed\n", t.LeaseUntil.UTC().Format(time.RFC3339))
	}
	if t.Lapsed != "" {
		fmt.Fprintf(w, "the claim of %s lapsed\n", t.Lapsed)
	}
	if t.Body != "" {
		fmt.Fprintln(w, termsafe.Escape(t.Body))
	}
}
