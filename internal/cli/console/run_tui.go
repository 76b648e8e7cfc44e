package console

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// runTUI runs the terminal UI until q, Ctrl-C or a lost mesh.
func runTUI(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	uid := protocol.NewLifecycleUID() // its admin credential's history reader reads recent messages at start
	ep, err := opts.Connect(ctx, target, client.Config{
		Name: "console", Actor: "console_" + strconv.Itoa(os.Getpid()), Kind: protocol.CardEndpoint, ReconnectFor: opts.ReconnectFor,
		LifecycleUID: uid}, cmdutil.As{Profile: trust.ProfileAdmin})
	if err != nil {
		return err
	}
	defer ep.Close()
	dms := target.Creds == "" && target.CredsData == nil
	model := meshview.New(meshview.Config{Logger: opts.Logger})
	w := &meshview.Watcher{Endpoint: ep, Model: model, DMs: dms, Logger: opts.Logger}
	if dms {
		w.Reader = protocol.ConsumerHistory(ep.Principal(), uid)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, stop := model.Subscribe()
	defer stop()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		return err
	}
	// The task board and the file claims, followed beside the tap; a space without their
	// buckets says so in those lenses.
	team := &meshview.TeamWatcher{Conn: ep.Conn(), Space: target.Space, Model: model, Logger: opts.Logger}
	teamReady, teamDone := make(chan struct{}), make(chan error, 1)
	go func() { teamDone <- team.Run(ctx, func() { close(teamReady) }) }()
	select {
	case <-teamReady:
	case err := <-teamDone:
		return err
	}
	// Workflow runs are the project identity's to read; an answer is filed as the person
	// at the keyboard.
	rs := runsState{}
	rs.by, _ = cmdutil.OperatorIdentity()
	if opts.ConnectOperator != nil {
		if rep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner); err != nil {
			rs.err = err
		} else {
			defer rep.Close()
			rs.runs = &runstore.Space{JS: rep.JetStream(), Name: target.Space, Now: func() int64 { return time.Now().UnixMilli() }}
		}
	}
	t := &tui{model: model, events: events, dms: dms, now: time.Now, teamErr: team.Err, runs: rs,
		post: func(channel, text string) error {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			op, err := opts.ConnectSender(pctx, target)
			if err != nil {
				return err
			}
			defer op.Close()
			if _, err := op.Post(pctx, channel, client.Text(text)); err != nil {
				return err
			}
			return op.Close()
		}}
	p := tea.NewProgram(t, tea.WithContext(ctx), tea.WithInput(opts.IO.In), tea.WithOutput(opts.IO.Out))
	go func() {
		if err := <-done; err != nil {
			p.Send(closedMsg{})
			done <- err
			return
		}
		done <- nil
	}()
	go func() {
		if err := <-teamDone; err != nil {
			p.Send(closedMsg{})
			teamDone <- err
			return
		}
		teamDone <- nil
	}()
	_, err = p.Run()
	cancel()
	if terr := <-teamDone; terr != nil {
		return fmt.Errorf("console: %w", terr)
	}
	if werr := <-done; werr != nil {
		return fmt.Errorf("console: %w", werr)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}
