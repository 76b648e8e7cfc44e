package run

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// Hosted runs: without --local, start and resume ask the space's manager (the reference's
// run-start and run-resume on its endpoint rails), which drives the run and answers its id.

// hostedAnswer is what start and resume print with --json.
type hostedAnswer struct {
	RunID string `json:"runId"`
	Space string `json:"space"`
	Host  string `json:"host"`
}

// askManager sends command with args to the space's manager as the project's own
// identity and answers the run id it drives, or a refusal saying what to do.
func (o *Options) askManager(ctx context.Context, command string, args map[string]any, check func(ctx context.Context, js jetstream.JetStream, space string) error) error {
	target, err := o.Resolve(o.Mesh)
	if err != nil {
		return err
	}
	ep, err := o.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer func() { _ = ep.Close() }()
	if check != nil {
		if err := check(ctx, ep.JetStream(), target.Space); err != nil {
			return err
		}
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("lifecycle uid: %w", err)
	}
	uid := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
	caller := &mgrclient.EPCaller{NC: ep.Conn(), Space: target.Space, Caller: ep.Principal(), UID: uid}
	var got struct {
		RunID string `json:"runId"`
	}
	_, err = caller.Call(ctx, mgrclient.EPCall{Command: command, Args: args}, &got)
	if err != nil {
		return explainHosted(err, target.Space, command, args)
	}
	if runstore.CheckID("run id", got.RunID) != nil {
		return fmt.Errorf("the manager of space %s answered %s with no run id", target.Space, command)
	}
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, hostedAnswer{RunID: got.RunID, Space: target.Space, Host: runstore.DefaultEndpoint})
	}
	verb := "started"
	if command == "run-resume" {
		verb = "resumed"
	}
	fmt.Fprintf(o.IO.Out, "%s run %s on the manager of space %s\n", verb, got.RunID, target.Space)
	fmt.Fprintf(o.IO.ErrOut, "next: cotal run ps (cotal run answer answers its checkpoints)\n")
	return nil
}

// explainHosted turns a manager's refusal of a hosted start or resume into what to do.
func explainHosted(err error, space, command string, args map[string]any) error {
	var me *mgrclient.Error
	what := "a hosted run in space " + space
	if id, ok := args["runId"].(string); ok {
		what = "run " + id
	}
	switch {
	case errors.Is(err, mgrclient.ErrNoManager):
		return cmdutil.Refuse(what, "no manager serves space "+space+": start one with `cotal up`, or drive the run in this process with --local", "cotal up")
	case errors.As(err, &me) && me.Code == mgrclient.EPNotFound:
		return cmdutil.Refuse(what, "the space has no record of it", "cotal run ps")
	case errors.As(err, &me) && me.Code == mgrclient.EPConflict:
		return cmdutil.Refuse(what, "the manager of space "+space+" already drives it", "cotal run ps")
	case errors.As(err, &me):
		return cmdutil.Refuse(what, "the manager of space "+space+" refused "+command+": "+cmdutil.OneLine(me.Message), "")
	}
	return fmt.Errorf("ask the manager of space %s to %s: %w", space, strings.TrimPrefix(command, "run-"), err)
}
