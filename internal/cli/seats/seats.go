// Package seats implements the commands that ask the agent manager about its seats:
// `cotal ps`, `cotal stop`, `cotal attach` and `cotal input`, and the manager call behind
// `cotal spawn --detach`.
package seats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Dial connects to the mesh flags names (resolve) as the operator at the keyboard
// (connectOperator with the project's own identity, the provisioner: only it may use the
// manager's operator rail, and the manager answers there only the operator it runs for)
// and returns a manager client and the endpoint to close.
func Dial(ctx context.Context, resolve cmdutil.ResolveFunc, connectOperator cmdutil.ConnectAsFunc, flags cmdutil.MeshFlags) (*mgrclient.Client, *client.Endpoint, cmdutil.Target, error) {
	t, err := resolve(flags)
	if err != nil {
		return nil, nil, t, err
	}
	ep, err := connectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return nil, nil, t, err
	}
	return &mgrclient.Client{NC: ep.Conn(), Space: t.Space, Caller: ep.Principal(), Operator: true}, ep, t, nil
}

// Explain turns a manager call's error into what to do next.
func Explain(err error, space string) error {
	var me *mgrclient.Error
	switch {
	case errors.Is(err, mgrclient.ErrNoManager):
		return cmdutil.Refuse("a request to the agent manager of space "+space, "no manager serves it", "cotal supervise --space "+space)
	case errors.As(err, &me) && me.Code == protocol.MgrCodeNotFound:
		return cmdutil.WithNext(fmt.Errorf("%s", me.Message), "cotal ps")
	case errors.As(err, &me):
		return fmt.Errorf("the manager refused: %s", me.Message)
	}
	return err
}

func errNoManager() error { return mgrclient.ErrNoManager }

// decodeAnswer reads a manager answer body into out.
func decodeAnswer(b []byte, out any) error {
	var r protocol.MgrReply
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("manager answer: %w", err)
	}
	if !r.OK {
		return &mgrclient.Error{Code: r.Code, Message: r.Error}
	}
	return json.Unmarshal(r.Data, out)
}

// seatNames lists the seats of the space's manager on the mesh flags name, as cotal ps
// sees them: the names stop, attach and input complete.
func seatNames(f *cmdutil.Factory, flags *cmdutil.MeshFlags) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		c, ep, _, err := Dial(ctx, f.Resolve, f.ConnectOperator, *flags)
		if err != nil {
			return nil, err
		}
		defer ep.Close()
		var res protocol.PsResult
		if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &res); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(res.Seats))
		for _, s := range res.Seats {
			names = append(names, s.Name)
		}
		return names, nil
	}
}

// completeSeats makes stop, attach and input complete seat names, as their argument and
// as --name.
func completeSeats(cmd *cobra.Command, f *cmdutil.Factory, flags *cmdutil.MeshFlags) {
	cmd.ValidArgsFunction = cmdutil.Complete(0, seatNames(f, flags))
	_ = cmd.RegisterFlagCompletionFunc("name", cmdutil.Complete(-1, seatNames(f, flags)))
}
