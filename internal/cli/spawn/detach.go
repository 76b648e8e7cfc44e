package spawn

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/seats"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// runDetach asks the manager to spawn, prints the seat's name and uid at once, then waits
// for the spawn to settle and reports it.
func runDetach(ctx context.Context, opts *Options) error {
	c, ep, t, err := seats.Dial(ctx, opts.Resolve, opts.ConnectOperator, cmdutil.MeshFlags{Space: opts.Space, Server: opts.Server, TLSCA: opts.TLSCA})
	if err != nil {
		return err
	}
	defer ep.Close()
	cwd := opts.Cwd
	if cwd == "" {
		if opts.Getwd != nil {
			cwd, _ = opts.Getwd()
		}
	} else if abs, err := filepath.Abs(cwd); err == nil {
		cwd = abs
	}
	if cwd != "" {
		if err := checkCwd(cwd); err != nil {
			return err
		}
	}
	args := protocol.SpawnArgs{Persona: opts.Persona, Name: opts.Name, Agent: opts.Agent, Role: opts.Role,
		Model: opts.Model, Prompt: opts.Prompt, Cwd: cwd, Args: opts.Args}
	var res protocol.SpawnResult
	if err := c.Call(ctx, protocol.MgrSpawn, args, &res); err != nil {
		return seats.Explain(err, t.Space)
	}
	fmt.Fprintf(opts.IO.Out, "spawned %s (persona %s, %s, lifecycle uid %s) on the manager of space %s\n",
		res.Name, res.Persona, res.Agent, orNone(res.UID), t.Space)
	window := time.Duration(res.WindowMs) * time.Millisecond
	wctx, cancel := context.WithTimeout(ctx, window+15*time.Second)
	defer cancel()
	var ps protocol.PsResult
	if err := c.Call(wctx, protocol.MgrPs, protocol.NameArgs{Name: res.Name, Wait: true}, &ps); err != nil {
		return seats.Explain(err, t.Space)
	}
	if len(ps.Seats) == 0 {
		return fmt.Errorf("the manager no longer lists %s", res.Name)
	}
	s := ps.Seats[0]
	switch s.Outcome {
	case protocol.SettleSucceeded:
		fmt.Fprintf(opts.IO.Out, "%s: succeeded (in the roster)\n", s.Name)
	case protocol.SettleFailed:
		code := "?"
		if s.Code != nil {
			code = fmt.Sprint(*s.Code)
		}
		fmt.Fprintf(opts.IO.Out, "%s: failed: it exited with status %s before joining the roster\n", s.Name, code)
		if tail := strings.TrimSpace(s.LogTail); tail != "" {
			fmt.Fprintf(opts.IO.Out, "last lines of .cotal/logs/agents/%s.log:\n", s.Name)
			for _, line := range strings.Split(tail, "\n") {
				fmt.Fprintf(opts.IO.Out, "  %s\n", termsafe.Escape(strings.TrimRight(line, "\r")))
			}
		}
		return &cmdutil.ExitError{Code: 1}
	default:
		fmt.Fprintf(opts.IO.Out, "%s: uncertain: not in the roster after %s; it still runs (cotal ps, cotal attach --name %s)\n", s.Name, window, s.Name)
	}
	return nil
}
