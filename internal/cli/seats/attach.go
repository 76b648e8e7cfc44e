package seats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
)

// detachKey is Ctrl-].
const detachKey = 0x1d

// AttachOptions are the flags of `cotal attach`.
type AttachOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	Name            string
}

// NewCmdAttach builds `cotal attach`.
func NewCmdAttach(f *cmdutil.Factory, runF func(context.Context, *AttachOptions) error) *cobra.Command {
	opts := &AttachOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "attach (<name> | --name N)",
		Short: "Attach this terminal to an agent's terminal",
		Long: `Stream the terminal of one seat of the space's agent manager here, both ways, over the
mesh: first the screen so far (its last 256 KiB of output), then what it prints as it
prints it; what you type goes to it. Ctrl-] detaches and leaves the agent running. With
stdin not a terminal, what it holds is typed into the seat and attach detaches at its
end. Operator only.`,
		Example: `  cotal attach --name coder                  # Ctrl-] to detach
  printf '/status\n' | cotal attach --name coder
  cotal attach coder`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cmdutil.OneName(args, opts.Name)
			if err != nil {
				return err
			}
			opts.Name = name
			if !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("agent name %q: give the agent as the argument or with --name (see cotal ps)", opts.Name)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAttach(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "the agent to attach to")
	completeSeats(cmd, f, &opts.Mesh)
	return cmd
}

func runAttach(ctx context.Context, opts *AttachOptions) error {
	c, ep, t, err := Dial(ctx, opts.Resolve, opts.ConnectOperator, opts.Mesh)
	if err != nil {
		return err
	}
	defer ep.Close()
	nc := ep.Conn()
	session := nuid.Next()
	subj := c.Subject(protocol.MgrAttach)
	reply := subj + "." + protocol.ReplyToken + "." + session
	frames := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(reply, frames)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	send := func(op, reply string, v any) error {
		b, _ := json.Marshal(v) // plain structs always encode
		return nc.PublishMsg(&nats.Msg{Subject: c.Subject(op), Reply: reply, Data: b})
	}
	if err := send(protocol.MgrAttach, reply, protocol.AttachArgs{Name: opts.Name, Session: session}); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	var first *nats.Msg
	select {
	case first = <-frames:
	case <-time.After(15 * time.Second):
		return Explain(fmt.Errorf("attach: no answer from the manager"), t.Space)
	case <-ctx.Done():
		return ctx.Err()
	}
	if first.Header.Get("Status") == "503" {
		return Explain(errNoManager(), t.Space)
	}
	var res protocol.AttachResult
	if err := decodeAnswer(first.Data, &res); err != nil {
		return Explain(err, t.Space)
	}
	out := opts.IO.Out
	if _, err := out.Write(res.Screen); err != nil {
		return err
	}
	defer func() {
		_ = send(protocol.MgrAttach, "", protocol.AttachArgs{Name: opts.Name, Session: session, Detach: true})
		_ = nc.Flush()
	}()

	inFile, isFile := opts.IO.In.(*os.File)
	tty := isFile && term.IsTerminal(inFile.Fd())
	if tty {
		st, err := term.MakeRaw(inFile.Fd())
		if err == nil {
			defer func() { _ = term.Restore(inFile.Fd(), st) }()
		}
		fmt.Fprintf(opts.IO.ErrOut, "[cotal: attached to %s; Ctrl-] detaches]\r\n", opts.Name)
	}
	input := make(chan []byte)
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		buf := make([]byte, 4096)
		for {
			n, err := opts.IO.In.Read(buf)
			if n > 0 {
				select {
				case input <- append([]byte(nil), buf[:n]...):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	renew := time.NewTicker(RenewEvery(res.TTLMs))
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-frames:
			switch m.Header.Get(protocol.MgrTTYHeader) {
			case "out":
				if _, err := out.Write(m.Data); err != nil {
					return err
				}
			case "exit":
				fmt.Fprintf(opts.IO.ErrOut, "\r\n[cotal: %s exited]\r\n", opts.Name)
				return nil
			}
		case b := <-input:
			if i := bytes.IndexByte(b, detachKey); i >= 0 && tty {
				if i > 0 {
					_ = send(protocol.MgrInput, "", protocol.InputArgs{Name: opts.Name, Data: b[:i]})
				}
				fmt.Fprintf(opts.IO.ErrOut, "\r\n[cotal: detached from %s]\r\n", opts.Name)
				return nil
			}
			if err := send(protocol.MgrInput, "", protocol.InputArgs{Name: opts.Name, Data: b}); err != nil {
				return fmt.Errorf("attach: input: %w", err)
			}
		case <-inDone:
			if !tty {
				return nc.Flush() // piped input typed; detach
			}
			inDone = nil
		case <-renew.C:
			if err := send(protocol.MgrAttach, "", protocol.AttachArgs{Name: opts.Name, Session: session, Renew: true}); err != nil {
				return fmt.Errorf("attach: renew: %w", err)
			}
		}
	}
}

// Bounds of the attach session TTL a manager answers with.
const (
	defaultAttachTTL = 15 * time.Second
	minAttachTTL     = time.Second
	maxAttachTTL     = 10 * time.Minute
)

// RenewEvery is how often attach renews a session whose TTL the manager answered with
// (ttlMs, a value from the network): a third of it, the TTL taken within 1 s and 10 min,
// and 15 s when it is not positive.
func RenewEvery(ttlMs int64) time.Duration {
	ttl := defaultAttachTTL
	switch {
	case ttlMs <= 0:
	case ttlMs < minAttachTTL.Milliseconds():
		ttl = minAttachTTL
	case ttlMs > maxAttachTTL.Milliseconds():
		ttl = maxAttachTTL
	default:
		ttl = time.Duration(ttlMs) * time.Millisecond
	}
	return ttl / 3
}
