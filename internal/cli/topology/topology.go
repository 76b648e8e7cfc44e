// Package topology implements `cotal topology view -f FILE`: validate a manifest with the
// parser of the command that reads it, and draw what it starts, touching no broker.
//
// Two manifests start things: a project manifest (cotal.yaml, what `cotal up -f` reads:
// one space, its daemons, channels and agents) and a space manifest (the JSON
// `cotal deliver --spaces` and `cotal auth-service --spaces` read: one host process, one
// lane per space).
package topology

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/workspace"
)

// maxSpaceList bounds a space manifest read (a manifest of thousands of spaces is KBs).
const maxSpaceList = 4 << 20

// Options are the flags of `cotal topology view`.
type Options struct {
	IO   *iostreams.IOStreams
	File string // -f: the manifest
}

// NewCmdTopology builds `cotal topology` and `cotal topology view`.
func NewCmdTopology(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology <view>",
		Short: "Validate a manifest and draw what it starts",
		Example: `  cotal topology view -f cotal.yaml
  cotal topology view -f spaces.json`,
		Args: cobra.NoArgs,
	}
	cmdutil.Group(cmd)
	opts := &Options{IO: f.IO}
	view := &cobra.Command{
		Use:   "view -f MANIFEST",
		Short: "Validate a manifest and draw what it starts, touching no broker",
		Long: `Validate a manifest with the parser of the command that reads it, and draw what it
starts as a tree; nothing is started or written and no broker is asked.

A project manifest (cotal.yaml, what cotal up -f reads) draws the mesh, the host that
runs cotal up, the space, the daemons cotal up starts for it (broker, delivery daemon,
agent manager), its channels with who reads and posts, and its agents with their
access. It is refused with the errors cotal up -f gives.

A space manifest (JSON, what cotal deliver --spaces and cotal auth-service --spaces
read) draws each daemon that can serve it as one host process with one lane per space.
It is refused with the errors those daemons give.`,
		Example: `  cotal topology view -f cotal.yaml
  cotal topology view -f .cotal/auth-service.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.File == "" {
				return cmdutil.FlagErrorf("topology view needs -f <manifest>: a cotal.yaml or a space manifest (JSON)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runView(opts)
		},
	}
	view.Flags().StringVarP(&opts.File, "file", "f", "", "the manifest: a cotal.yaml or a space manifest (JSON)")
	cmd.AddCommand(view)
	return cmd
}

func runView(opts *Options) error {
	// Stat before the manifest is opened: opening a named pipe waits for a writer.
	if err := (cmdutil.UserFile{Flag: "-f", Path: opts.File, Kind: "a cotal.yaml or a space manifest (JSON)", Max: maxSpaceList}).CheckStat(); err != nil {
		return err
	}
	data, err := readHead(opts.File)
	if err != nil {
		return err
	}
	if isSpaceList(data) {
		return viewSpaceList(opts.IO.Out, opts.File)
	}
	return viewProject(opts.IO.Out, opts.File)
}

// readHead reads the start of the file, enough to tell the two manifests apart.
func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	b := make([]byte, 512)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	return b[:n], nil
}

// isSpaceList reports whether a file is a space manifest: a JSON object (a cotal.yaml is
// a YAML mapping, which starts with a key or a comment).
func isSpaceList(head []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(head), []byte("{"))
}

// tree writes an indented tree, one node per line.
type tree struct {
	w io.Writer
}

// line writes text under prefix, with a branch for the last child or not.
func (t tree) line(prefix string, last bool, text string) string {
	branch, next := "├─ ", "│  "
	if last {
		branch, next = "└─ ", "   "
	}
	fmt.Fprintf(t.w, "%s%s%s\n", prefix, branch, text)
	return prefix + next
}

// viewProject validates a cotal.yaml as `cotal up -f` does and draws it.
func viewProject(out io.Writer, path string) error {
	m, err := workspace.LoadManifest(path)
	if err != nil {
		return err
	}
	open, err := cmdutil.ManifestMode(m, path, false)
	if err != nil {
		return err
	}
	mode := "authenticated"
	if open {
		mode = "open"
	}
	personas, err := m.LoadPersonas()
	if err != nil {
		return err
	}
	acc := m.AccessWith(personas)
	servers := "loopback, 4222 or a free port"
	if len(m.Broker.Servers) > 0 {
		servers = strings.Join(m.Broker.Servers, ", ")
	}
	fmt.Fprintf(out, "%s: a valid project manifest (cotal up -f %s); nothing started\n", path, path)
	fmt.Fprintf(out, "mesh %s (%s)\n", servers, mode)
	t := tree{out}
	host := t.line("", true, "host: the machine that runs cotal up -f "+path)
	space := t.line(host, true, "space "+m.Space)
	d := t.line(space, false, "daemons")
	runtime := m.Runtime
	if runtime == "" {
		runtime = "pty"
	}
	if mode == "open" {
		t.line(d, true, "broker (embedded nats-server, no accounts: an open mesh runs no other daemon)")
	} else {
		t.line(d, false, "broker (embedded nats-server, one account per space)")
		t.line(d, false, "delivery daemon (lane of space "+m.Space+")")
		t.line(d, true, "agent manager (runtime "+runtime+"; cotal up --no-manager leaves it out)")
	}
	last := len(m.Agents) == 0
	c := t.line(space, last, fmt.Sprintf("channels (%d)", len(m.Channels)))
	for i, ch := range m.Channels {
		text := fmt.Sprintf("#%s  read: %s  post: %s", ch.Name, list(ch.Readers()), list(ch.AllowPublish))
		if ch.DeliveryClass != "" {
			text += "  (" + ch.DeliveryClass + ")"
		}
		t.line(c, i == len(m.Channels)-1, text)
	}
	if last {
		return nil
	}
	a := t.line(space, true, fmt.Sprintf("agents (%d)", len(m.Agents)))
	for i, ag := range m.Agents {
		x := acc[ag.Name]
		text := ag.Name
		if x.Role != "" {
			text += "  role=" + x.Role
		}
		if h := cmp.Or(ag.Agent, m.Agent); h != "" {
			text += "  runs " + h
		}
		text += fmt.Sprintf("  joins: %s  reads: %s  posts: %s", list(x.Subscribe), list(x.AllowSubscribe), list(x.AllowPublish))
		t.line(a, i == len(m.Agents)-1, text)
	}
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
}

// viewSpaceList validates a space manifest as each daemon that reads one does, and draws
// a host per daemon that accepts it. It is refused when neither does.
func viewSpaceList(out io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpaceList+1))
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", path, err)
	}
	if len(data) > maxSpaceList {
		return fmt.Errorf("space manifest %s: larger than %d bytes", path, maxSpaceList)
	}
	auth, authErr := spacehost.ParseSpaceList(data, authsvc.ParseEntry)
	dlv, dlvErr := spacehost.ParseSpaceList(data, nil)
	if authErr != nil && dlvErr != nil {
		if authErr.Error() == dlvErr.Error() {
			return fmt.Errorf("%s: %w", path, authErr)
		}
		return fmt.Errorf("%s: as cotal auth-service --spaces reads it: %w; as cotal deliver --spaces reads it: %w", path, authErr, dlvErr)
	}
	valid := auth
	if valid == nil {
		valid = dlv
	}
	fmt.Fprintf(out, "%s: a valid space manifest (version %d, %s); nothing started\n", path, valid.Version, cmdutil.Count(len(valid.Spaces), "space"))
	t := tree{out}
	var hosts []func(last bool)
	if auth != nil {
		hosts = append(hosts, func(last bool) { drawHost(t, last, "cotal auth-service --spaces "+path, "auth service", auth) })
	}
	if dlv != nil {
		hosts = append(hosts, func(last bool) { drawHost(t, last, "cotal deliver --spaces "+path, "delivery daemon", dlv) })
	}
	for i, h := range hosts {
		h(i == len(hosts)-1)
	}
	if auth == nil {
		fmt.Fprintf(out, "(cotal auth-service --spaces refuses it: %v)\n", authErr)
	}
	if dlv == nil {
		fmt.Fprintf(out, "(cotal deliver --spaces refuses it: %v)\n", dlvErr)
	}
	return nil
}

// drawHost draws one host process: a lane per space, each serving its space with the
// daemon named.
func drawHost(t tree, last bool, command, daemon string, m *spacehost.SpaceList) {
	h := t.line("", last, "host: "+command+" (one process)")
	for i, e := range m.Spaces {
		lane := t.line(h, i == len(m.Spaces)-1, "lane "+e.Space)
		text := "space " + e.Space + ": " + daemon
		if len(e.Raw) > 0 && string(e.Raw) != `{"space":"`+e.Space+`"}` {
			text += "  " + cmdutil.OneLine(string(e.Raw))
		}
		t.line(lane, true, text)
	}
}
