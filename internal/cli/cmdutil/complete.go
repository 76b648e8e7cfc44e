package cmdutil

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// CompleteTimeout bounds a completion that asks the mesh: the shell waits on it, so a
// mesh that is slow or gone yields no names rather than a hung prompt.
const CompleteTimeout = 2 * time.Second

// CompletionFunc completes a command's argument or flag value (cobra's ValidArgsFunction
// and RegisterFlagCompletionFunc): the names that start with toComplete, no file names.
type CompletionFunc = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

// Complete turns a lister of names into a CompletionFunc: its names that start with
// toComplete, sorted and without repeats, completed only as the argument at position
// pos (-1: any position, as for a flag's value). A lister that fails yields nothing.
func Complete(pos int, list func(ctx context.Context) ([]string, error)) CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if pos >= 0 && len(args) != pos {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), CompleteTimeout)
		defer cancel()
		names, err := bounded(ctx, list)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}

// bounded runs list, returning at ctx's end even if list does not heed ctx (a dial that
// waits out its own timeout); list then finishes on its own.
func bounded(ctx context.Context, list func(ctx context.Context) ([]string, error)) ([]string, error) {
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, err := list(ctx)
		done <- result{names, err}
	}()
	select {
	case r := <-done:
		return r.names, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// PersonaNames lists the personas of the project of the current folder: the names of
// its valid persona files.
func (f *Factory) PersonaNames(context.Context) ([]string, error) {
	if f.Getwd == nil {
		return nil, errors.New("no current folder")
	}
	wd, err := f.Getwd()
	if err != nil {
		return nil, err
	}
	proj, err := workspace.FindProject(wd, f.Getenv)
	if err != nil {
		return nil, err
	}
	files, err := proj.PersonaFiles()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, pf := range files {
		if pf.Err == nil {
			names = append(names, pf.Name)
		}
	}
	return names, nil
}

// onMesh connects to the mesh flags name (the project's running mesh by default) as an
// observer, calls read with the endpoint, and closes it.
func (f *Factory) onMesh(ctx context.Context, flags *MeshFlags, read func(*client.Endpoint) ([]string, error)) ([]string, error) {
	t, err := f.Resolve(*flags)
	if err != nil {
		return nil, err
	}
	ep, err := f.ConnectPerson(ctx, t, trust.ProfileObserver)
	if err != nil {
		return nil, err
	}
	defer ep.Close()
	return read(ep)
}

// PeerNames lists the names of the peers in the roster of the mesh flags name.
func (f *Factory) PeerNames(flags *MeshFlags) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		return f.onMesh(ctx, flags, func(ep *client.Endpoint) ([]string, error) {
			peers, err := ep.Roster(ctx)
			var names []string
			for _, p := range peers {
				names = append(names, p.Card.Name)
			}
			return names, err
		})
	}
}

// RoleNames lists the roles of the peers in the roster of the mesh flags name.
func (f *Factory) RoleNames(flags *MeshFlags) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		return f.onMesh(ctx, flags, func(ep *client.Endpoint) ([]string, error) {
			peers, err := ep.Roster(ctx)
			var names []string
			for _, p := range peers {
				if p.Card.Role != "" {
					names = append(names, p.Card.Role)
				}
			}
			return names, err
		})
	}
}

// ChannelNames lists the channels of the mesh flags name: those with history or a
// registry entry.
func (f *Factory) ChannelNames(flags *MeshFlags) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		return f.onMesh(ctx, flags, func(ep *client.Endpoint) ([]string, error) {
			stats, err := ep.ChannelStats(ctx)
			var names []string
			for _, s := range stats {
				names = append(names, s.Name)
			}
			return names, err
		})
	}
}
